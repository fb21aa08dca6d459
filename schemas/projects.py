"""State of the project-risk and conversation-indicator folds, and the records on their internal topics (issue 4).

What they publish reuses `schemas.views` (ProjectDetail, ConversationItem) and `schemas.events`; the models here are
the values of their tables and of the topics between them:

    thread-state (in the engine's fold) [thread_id] + conversation-links [thread_id] -> ThreadRoutes (in its slot)
        -> thread-state-by-project [project_id]: ThreadInProject | ThreadLeft -> ProjectState
        -> conversation-threads [conversation_id]: ConversationThread
    handoff-packages [from_thread_id] -> ThreadRoutes
        -> conversation-threads [conversation_id]: ConversationRelay (a consumed package: spec 7.3)
    task-importance [thread_id] -> ThreadRoutes (the importance ranks the thread in its project)
    conversations [conversation_id] + conversation-threads -> ConversationIndicatorState
        -> conversation-links [thread_id]: ConversationLink
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.base import Flag, Id, IdList, Name, Percent, Record, Timestamp
from schemas.enums import ContextBudgetLevel, WorkFact
from schemas.state import ThreadState
from schemas.views import Conversation, ConversationItem, Importance, ProjectDetail, ThreadContextSummary

MAX_LIVE_THREADS = 1_000
"""Live threads kept per project. A summary is ~300 bytes of JSON and the state holds it twice (live and published),
so this keeps the state and the published ProjectDetail under Kafka's default 1 MB message limit."""
MAX_LINKED_CONVERSATIONS = 64
"""Conversations that show one thread (its single-device conversation, the master's): far more is a registry error."""


class LiveThread(Record):
    """A live thread of a project: what the project view shows of it (6.2) and what ranks it (8.1, 8.2)."""

    summary: ThreadContextSummary
    active_facts: Annotated[list[WorkFact], Field(max_length=len(WorkFact))] = Field(default_factory=list)
    requires_handoff: Flag = Field(default=False, description="Handoff due by its level and no ready package.")
    task_importance: Importance | None = None


class ProjectState(Record):
    """The project table's value [project_id]: live threads in rank order and the view last published."""

    project_id: Id
    threads: Annotated[list[LiveThread], Field(max_length=MAX_LIVE_THREADS)] = Field(default_factory=list)
    published: ProjectDetail | None = None


class ThreadLeft(Record):
    """Tells a project's fold that one of its threads now reports under another project."""

    thread_id: Id
    project_id: Id = Field(description="The project the thread left.")
    left_at: Timestamp = Field(description="`updated_at` of the thread state that showed the move.")


class ThreadInProject(Record):
    """What a project's view keeps of one of its threads, sent by the routing fold when what the view shows of the
    thread changes, and at least every `ProjectsConfig.refresh_after` while the thread reports (so an active thread
    whose values hold still is not retired as idle)."""

    project_id: Id
    thread: LiveThread


ProjectInput = ThreadInProject | ThreadLeft | ThreadState
"""A record on `thread-state-by-project` [project_id]. Versions before `ThreadInProject` sent the whole ThreadState;
it is still read, so records left on the topic across an upgrade are applied, not dead-lettered."""


class ShownThread(Record):
    """What a conversation's ring needs of a thread (spec 6.1)."""

    thread_id: Id
    project_id: Id
    node_id: Id
    context_budget_remaining_pct: Percent
    context_budget_level: ContextBudgetLevel
    must_finish_before_compaction: Flag
    stale: Flag
    updated_at: Timestamp


class ConversationThread(Record):
    """A record of `conversation-threads` [conversation_id]: a shown thread's ring values for one conversation.

    It names its conversation so the indicator fold can check the key like on every other topic."""

    conversation_id: Id
    shown: ShownThread


class ConversationLink(Record):
    """A conversation starts (`linked`) or stops showing a thread: keyed by thread_id for the routing table."""

    conversation_id: Id
    thread_id: Id
    linked: Flag


class ConversationRelay(Record):
    """A record of `conversation-threads` [conversation_id]: a package of the thread the conversation shows was
    consumed into `to_thread_id` (spec 7.3); a master conversation showing `from_thread_id` moves to the relay."""

    conversation_id: Id
    from_thread_id: Id
    to_thread_id: Id
    relayed_at: Timestamp = Field(description="`consumed_at` of the package.")


class TaskImportance(Record):
    """A record of `task-importance` [thread_id], compacted: the importance of the thread's task (spec 8.1), as a
    master or operator last set it. The newest `set_at` wins, so a replayed older record changes nothing."""

    thread_id: Id
    project_id: Id = Field(description="The thread's project when the importance was set.")
    task_importance: Importance
    set_by: Name = Field(description="The token subject that set it.")
    set_at: Timestamp


class ThreadRoutes(Record):
    """The routing's state [thread_id], kept in the engine's slot: the thread's last shown values, the conversations
    that show it, what was last forwarded to its project, and its task's importance."""

    thread_id: Id
    shown: ShownThread | None = None
    forwarded: ThreadInProject | None = None
    conversation_ids: Annotated[IdList, Field(max_length=MAX_LINKED_CONVERSATIONS)] = Field(default_factory=list)
    importance: TaskImportance | None = None


class ConversationIndicatorState(Record):
    """The indicator table's value [conversation_id]: the registry entry, its thread's values, the item published."""

    conversation: Conversation | None = None
    shown: ShownThread | None = None
    published: ConversationItem | None = None
