"""The three project folds over a batch, as the topology runs them: decode, check the key, fold (`fold_records`).

    thread-state + conversation-links + task-importance + handoff-packages [thread_id] -> routes_batch -> ThreadRoutes
    thread-state-by-project [project_id] (+ the timer) -> projects_batch   -> ProjectState   (retire_idle_projects)
    conversations + conversation-threads [conversation_id] -> indicators_batch -> ConversationIndicatorState

Each is the pure fold of `routes`, `risk` or `indicators` behind one decoder per input topic; the records on the
internal topics feed the next fold through Kafka, as `tests/unit/aggregates/builders.Pipeline` feeds them in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from core.topics import HANDOFF_PACKAGES, TASK_IMPORTANCE, THREAD_STATE
from schemas import Codec, Conversation, HandoffPackage, ThreadState
from schemas.projects import (
    ConversationIndicatorState,
    ConversationLink,
    ConversationRelay,
    ProjectInput,
    ProjectState,
    TaskImportance,
    ThreadRoutes,
)
from streams.aggregates import indicators, risk, routes
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import (
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    CONVERSATIONS,
    THREAD_STATE_BY_PROJECT,
    Change,
    ConversationThread,
)
from streams.batching import DEADLETTER, BatchResult, InputMessage, fold_records

ROUTES_CODEC = Codec(ThreadRoutes)
PROJECT_CODEC = Codec(ProjectState)
INDICATOR_CODEC = Codec(ConversationIndicatorState)
"""Table values."""

ROUTES_DECODERS = {
    THREAD_STATE: Codec(ThreadState),
    CONVERSATION_LINKS: Codec(ConversationLink),
    TASK_IMPORTANCE: Codec(TaskImportance),
    HANDOFF_PACKAGES: Codec(HandoffPackage),
}
PROJECT_DECODERS = {THREAD_STATE_BY_PROJECT: Codec(ProjectInput)}
INDICATOR_DECODERS = {
    CONVERSATIONS: Codec(Conversation),
    CONVERSATION_THREADS: Codec(ConversationThread | ConversationRelay),
}
SHARED_INPUTS = (THREAD_STATE, HANDOFF_PACKAGES)
"""Inputs the engine or the projection reads too and dead-letters, once, when invalid."""


def routes_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ThreadRoutes | None],
    now: datetime,
    config: ProjectsConfig,
    prefix: str,
) -> BatchResult[ThreadRoutes]:
    result = fold_records(
        messages,
        load,
        ROUTES_DECODERS,
        key_of=lambda record: record.from_thread_id if isinstance(record, HandoffPackage) else record.thread_id,
        apply=lambda state, record, _logged_at: _route(state, record, config),
        now=now,
        prefix=prefix,
    )
    shared = {f"{prefix}{topic}" for topic in SHARED_INPUTS}
    result.emits = [e for e in result.emits if e.topic != DEADLETTER or e.record.source_topic not in shared]
    return result


def projects_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ProjectState | None],
    now: datetime,
    config: ProjectsConfig,
    prefix: str,
) -> BatchResult[ProjectState]:
    return fold_records(
        messages,
        load,
        PROJECT_DECODERS,
        key_of=lambda record: record.project_id,
        apply=lambda state, record, logged_at: risk.apply_project_input(state, record, logged_at, config),
        now=now,
        prefix=prefix,
    )


def retire_idle_projects(
    projects: Iterable[tuple[str, ProjectState]], now: datetime, config: ProjectsConfig
) -> BatchResult[ProjectState]:
    """The project fold's timer: threads idle past `config.retire_after` leave their project's view."""
    result: BatchResult[ProjectState] = BatchResult()
    for project_id, state in projects:
        change = risk.retire_idle(state, now, config)
        if change.state is not None:
            result.states[project_id] = change.state
        result.emits.extend(change.emits)
    return result


def indicators_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ConversationIndicatorState | None],
    now: datetime,
    prefix: str,
) -> BatchResult[ConversationIndicatorState]:
    return fold_records(
        messages,
        load,
        INDICATOR_DECODERS,
        key_of=lambda record: record.conversation_id,
        apply=lambda state, record, _logged_at: _indicate(state, record),
        now=now,
        prefix=prefix,
    )


def _route(
    state: ThreadRoutes | None,
    record: ThreadState | ConversationLink | TaskImportance | HandoffPackage,
    config: ProjectsConfig,
) -> Change[ThreadRoutes]:
    if isinstance(record, ConversationLink):
        return routes.apply_link(state, record)
    if isinstance(record, HandoffPackage):
        return routes.relay_conversations(state, record)
    if isinstance(record, TaskImportance):
        return routes.apply_importance(state, record)
    return routes.route_thread_state(state, record, config)


def _indicate(
    state: ConversationIndicatorState | None, record: Conversation | ConversationThread | ConversationRelay
) -> Change[ConversationIndicatorState]:
    if isinstance(record, ConversationThread):
        return indicators.apply_shown_thread(state, record.shown)
    if isinstance(record, ConversationRelay):
        return indicators.apply_relay(state, record)
    return indicators.apply_conversation(state, record)
