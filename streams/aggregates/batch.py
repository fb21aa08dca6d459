"""The project and indicator folds over a batch, as the topology runs them: decode, check the key, fold
(`fold_records`). Their inputs come from the routing fused into the engine's fold (`streams.engine.routing`).

    thread-state-by-project [project_id] (+ the timer) -> projects_batch   -> ProjectState   (retire_idle_projects)
    conversations + conversation-threads [conversation_id] -> indicators_batch -> ConversationIndicatorState

Each is the pure fold of `risk` or `indicators` behind one decoder per input topic; the records on the internal
topics feed the next fold through Kafka, as `tests/unit/aggregates/builders.Pipeline` feeds them in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from schemas import Codec, Conversation
from schemas.projects import (
    ConversationIndicatorState,
    ConversationRelay,
    ProjectInput,
    ProjectState,
)
from streams.aggregates import indicators, risk
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import (
    CONVERSATION_THREADS,
    CONVERSATIONS,
    THREAD_STATE_BY_PROJECT,
    Change,
    ConversationThread,
)
from streams.batching import BatchResult, InputMessage, fold_records

PROJECT_CODEC = Codec(ProjectState)
INDICATOR_CODEC = Codec(ConversationIndicatorState)
"""Table values."""

PROJECT_DECODERS = {THREAD_STATE_BY_PROJECT: Codec(ProjectInput)}
INDICATOR_DECODERS = {
    CONVERSATIONS: Codec(Conversation),
    CONVERSATION_THREADS: Codec(ConversationThread | ConversationRelay),
}


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


def _indicate(
    state: ConversationIndicatorState | None, record: Conversation | ConversationThread | ConversationRelay
) -> Change[ConversationIndicatorState]:
    if isinstance(record, ConversationThread):
        return indicators.apply_shown_thread(state, record.shown)
    if isinstance(record, ConversationRelay):
        return indicators.apply_relay(state, record)
    return indicators.apply_conversation(state, record)
