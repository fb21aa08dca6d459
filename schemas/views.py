"""Read models the BFF serves (spec 6.1-6.3) and the conversation registry they are computed from.

They are computed once, in the stream, and stored; readers never recompute a level (spec 9.6).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, model_validator

from schemas.base import Count, Flag, Id, IdList, LongText, Name, Percent, Record, ShortText, TextList, Timestamp
from schemas.enums import ContextBudgetLevel, ConversationType, MasterAction, PackageStatus, TriggerMode

Ring = Annotated[int, Field(strict=True, ge=0, le=100)]
"""The integer percent drawn in the ring marker."""
Importance = Annotated[int, Strict(), Field(ge=0, le=1_000)]
"""Task importance (spec 8.1): higher ranks first among otherwise equal threads."""


class Conversation(Record):
    """A record of the `conversations` registry [conversation_id]: a home-list entry and the thread(s) it shows."""

    conversation_id: Id
    conversation_type: ConversationType
    project_id: Id
    project_title: Name
    thread_ids: IdList = Field(
        default_factory=list,
        description="single_device: its one thread; master_agent: the master's current main thread (spec 7.3); "
        "group: every thread of the project.",
    )
    manual_pinned: Flag = False
    latest_reply_at: Timestamp | None = None
    updated_at: Timestamp

    @model_validator(mode="after")
    def _one_thread_unless_group(self) -> Conversation:
        if self.conversation_type is not ConversationType.GROUP and len(self.thread_ids) > 1:
            raise ValueError(f"a {self.conversation_type} conversation shows at most one thread")
        return self


class ContextBudgetIndicator(Record):
    """The ring marker (spec 6.1, 7.1-7.3). Invisible for group conversations, so percent and level are then null."""

    visible: Flag
    style: Literal["ring_percent"] = "ring_percent"
    percent: Ring | None = None
    level: ContextBudgetLevel | None = None
    stale: Flag = Field(default=False, description="The thread missed its report deadline: the value is its last.")

    @model_validator(mode="after")
    def _visible_has_value(self) -> ContextBudgetIndicator:
        if self.visible and (self.percent is None or self.level is None):
            raise ValueError("a visible indicator needs percent and level")
        if not self.visible and (self.percent is not None or self.level is not None or self.stale):
            raise ValueError("a hidden indicator carries no percent, level or staleness")
        return self


class ConversationItem(Record):
    """One entry of `GET /api/v1/conversations` (spec 6.1)."""

    conversation_id: Id
    conversation_type: ConversationType
    project_id: Id
    project_title: Name
    manual_pinned: Flag
    latest_reply_at: Timestamp | None
    context_budget_indicator: ContextBudgetIndicator
    context_budget_source_node_id: Id | None = None
    context_budget_updated_at: Timestamp | None = None
    must_finish_before_compaction: Flag = False


class ThreadContextSummary(Record):
    """One thread in a project's `active_thread_contexts` (spec 6.2)."""

    thread_id: Id
    node_id: Id
    task_id: Id | None = None
    context_budget_remaining_pct: Percent
    context_budget_level: ContextBudgetLevel
    must_finish_before_compaction: Flag
    compaction_expected_at: Timestamp | None = None
    stale: Flag = False
    updated_at: Timestamp
    task_importance: Importance | None = Field(
        default=None, description="The importance of the thread's task (spec 8.1), when one was set."
    )


class ProjectDetail(Record):
    """`GET /api/v1/projects/{project_id}` context fields (spec 6.2)."""

    project_id: Id
    active_thread_contexts: Annotated[list[ThreadContextSummary], Field(max_length=10_000)]
    next_compaction_risk_thread_id: Id | None = None
    threads_requiring_handoff: IdList = Field(default_factory=list)
    master_context_strategy_summary: LongText = ""
    new_subtask_thread_ids: IdList = Field(
        default_factory=list,
        description="Spec 8.2 point 4, machine-readable: where new subtasks should go, healthiest first "
        "(safe or watch, not stale, no must-finish work).",
    )


class KeyCommand(Record):
    command: ShortText
    result: ShortText = ""
    exit_code: Annotated[int, Strict()] | None = None


class WrapUpChecklist(Record):
    """The pre-compaction wrap-up checklist (spec 8.3), filled from what the engine knows of the thread."""

    files: TextList = Field(default_factory=list, description="Files the current changes touch.")
    completed_patches: TextList = Field(default_factory=list)
    pending_patches: TextList = Field(default_factory=list)
    last_key_command: KeyCommand | None = None
    last_test_conclusion: ShortText | None = None
    open_questions: TextList = Field(default_factory=list)
    suggested_next_action: ShortText | None = None
    evidence_links: TextList = Field(default_factory=list)


class ThreadContextBudget(Record):
    """`GET /api/v1/threads/{thread_id}/context-budget` (spec 6.3)."""

    thread_id: Id
    project_id: Id
    context_budget_remaining_pct: Percent
    context_budget_level: ContextBudgetLevel
    compaction_expected_at: Timestamp | None = None
    compaction_expected_earliest_at: Timestamp | None = Field(default=None, description="Low end of the forecast band.")
    compaction_expected_latest_at: Timestamp | None = Field(default=None, description="High end of the forecast band.")
    last_compaction_at: Timestamp | None = None
    last_compaction_trigger_mode: TriggerMode | None = None
    compaction_count: Count = 0
    must_finish_before_compaction: Flag = False
    pending_master_actions: Annotated[list[MasterAction], Field(max_length=len(MasterAction))] = Field(
        default_factory=list
    )
    wrap_up_checklist: WrapUpChecklist = Field(default_factory=WrapUpChecklist)
    handoff_package_id: Id | None = None
    handoff_package_status: PackageStatus | None = None
    stale: Flag = False
    updated_at: Timestamp
