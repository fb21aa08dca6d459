"""The projection over a batch: session events and the engine's thread states in; estimator snapshots out.

A budget reading becomes a `ThreadContextSnapshot` with `source_kind = worker_estimator` on `snapshots`, so the
engine treats it like any worker's report and its precedence rules decide whether it wins (issue 6). The snapshot
needs the thread's node, worker and project: they come from the events when the producer sets them, else from the
engine's `thread-state`. An event whose reading cannot be published for want of them is still folded, and goes to
the dead-letter topic (`identity_unknown`) so the gap is seen; the first event once they are known publishes.
Finished compactions leave as `compactions` records for the history tables (a manual compaction request is the
engine's: its `compact_now` action has the lifecycle of the others); every reading also leaves as a
`thread-projections` record (projected and sampled tokens, window, forecast band, latest manifest) for readers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from core import handoff
from core.fleet_points import PointLookup, no_points
from core.ids import derived_id
from core.levels import policy_for
from core.profiles import ProfileSet
from core.topics import COMPACTIONS, SESSION_EVENTS, SNAPSHOTS, THREAD_PROJECTIONS, THREAD_STATE
from schemas import (
    CompactionCompleted,
    CompactionFinished,
    CompactionStarted,
    SourceKind,
    ThreadContextSnapshot,
    ThreadWorkerMoved,
    ThresholdPolicy,
    WorkFactChanged,
)
from schemas.codec import Codec
from schemas.policy import DEFAULT_POLICY_PROJECT_ID
from schemas.projection import BudgetReading, ProjectionState, ThreadProjection
from schemas.session_events import SessionEvent
from schemas.state import ThreadState
from streams.batching import BatchResult, Change, Emit, InputMessage, fold_records
from streams.engine.batch import ENGINE_EVENTS, EVENT_CODEC
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.projection.fold import fold, thread_window

DECODERS = {SESSION_EVENTS: EVENT_CODEC, THREAD_STATE: Codec(ThreadState)}


@dataclass(frozen=True)
class Projection:
    """What the fold needs besides the events: one estimator per worker process (it caches per text)."""

    estimator: TokenEstimator
    profiles: ProfileSet
    config: ProjectionConfig
    lookup_policy: Callable[[str], ThresholdPolicy | None]
    lookup_point: PointLookup = no_points
    """The fleet's learned compaction points (the `compaction-points` global table)."""


def projection_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ProjectionState | None],
    now: datetime,
    projection: Projection,
    prefix: str,
) -> BatchResult[ProjectionState]:
    return fold_records(
        messages,
        load,
        DECODERS,
        key_of=lambda record: record.thread_id,
        apply=lambda state, record, _logged_at: apply(state, record, projection),
        now=now,
        prefix=prefix,
    )


def apply(
    state: ProjectionState | None, record: SessionEvent | ThreadState, projection: Projection
) -> Change[ProjectionState]:
    if isinstance(record, ThreadState):
        return Change(_learn(state, record))
    if isinstance(record, WorkFactChanged | ThreadWorkerMoved):
        return Change(None)  # the engine's inputs, not the projection's (it learns a move from the thread's state)
    if state is not None and state.worker_id is not None and record.worker_id not in (None, state.worker_id):
        # Another worker's event would take the thread's budget over; the engine dead-letters those it also reads.
        detail = f"the thread belongs to worker {state.worker_id!r}, the event names {record.worker_id!r}"
        return Change(None, dead_letter=None if isinstance(record, ENGINE_EVENTS) else ("worker_mismatch", detail))
    project = record.project_id or (state.project_id if state else None)
    policy = policy_for(project or DEFAULT_POLICY_PROJECT_ID, projection.lookup_policy)
    step = fold(
        state, record, projection.estimator, projection.profiles, projection.config, policy, projection.lookup_point
    )
    if step.state is None:
        return Change(None)
    changed = _identified(step.state, record)
    emits: list[Emit] = []
    unidentified: tuple[str, str] | None = None
    if step.reading is not None:
        emits.append(Emit(THREAD_PROJECTIONS, changed.thread_id, thread_projection(changed, step.reading)))
        if (snapshot := estimator_snapshot(changed, step.reading)) is not None:
            emits.append(Emit(SNAPSHOTS, changed.thread_id, snapshot))
        else:
            # Nothing the pipeline knows names the thread's node, worker or project: say so, and leave the reading
            # unmarked, so the first event once the identity is known (its own, or the engine's thread state)
            # publishes one.
            changed = changed.model_copy(
                update={
                    "last_reading": state.last_reading if state else None,
                    "readings_emitted": state.readings_emitted if state else 0,
                }
            )
            missing = [name for name in ("project_id", "node_id", "worker_id") if getattr(changed, name) is None]
            unidentified = (
                "identity_unknown",
                f"folded, but its budget reading cannot become a snapshot: no {', '.join(missing)} for thread "
                f"{changed.thread_id} (set them on the event, or report the thread's context first)",
            )
    if isinstance(record, CompactionCompleted) and changed.project_id is not None:
        emits.append(Emit(COMPACTIONS, changed.thread_id, _finished(changed, record, projection.profiles)))
    return Change(changed, emits, unidentified)


def estimator_snapshot(state: ProjectionState, reading: BudgetReading) -> ThreadContextSnapshot | None:
    if state.project_id is None or state.node_id is None or state.worker_id is None:
        return None
    return ThreadContextSnapshot(
        node_id=state.node_id,
        worker_id=state.worker_id,
        thread_id=state.thread_id,
        project_id=state.project_id,
        source_kind=SourceKind.WORKER_ESTIMATOR,
        context_budget_remaining_pct=reading.context_budget_remaining_pct,
        context_budget_level=reading.context_budget_level,
        compaction_expected_at=reading.compaction_expected_at,
        estimated_remaining_turns=reading.estimated_remaining_turns,
        estimated_remaining_large_messages=reading.estimated_remaining_large_messages,
        last_compaction_at=reading.last_compaction_at,
        compaction_count=reading.compaction_count,
        captured_at=reading.occurred_at,
        snapshot_id=derived_id(state.thread_id, "proj", str(reading.sequence)),
        snapshot_version=reading.sequence,
    )


def thread_projection(state: ProjectionState, reading: BudgetReading) -> ThreadProjection:
    last = state.compactions[-1] if state.compactions else None
    return ThreadProjection(
        thread_id=state.thread_id,
        project_id=state.project_id,
        projected_tokens=reading.projected_tokens,
        sampled_tokens=reading.sampled_tokens,
        sampled_at=state.sample.occurred_at if state.sample else None,
        surface_tokens=reading.surface_tokens,
        context_window_tokens=reading.window_tokens,
        heuristic=reading.heuristic,
        estimated_remaining_turns=reading.estimated_remaining_turns,
        estimated_remaining_large_messages=reading.estimated_remaining_large_messages,
        compaction_expected_at=reading.compaction_expected_at,
        compaction_expected_earliest_at=reading.compaction_expected_low_at,
        compaction_expected_latest_at=reading.compaction_expected_high_at,
        last_compaction_trigger_mode=last.trigger_mode if last else None,
        truncated_tool_results=state.truncated_tool_results,
        estimate_accuracy=state.estimate_accuracy,
        latest_manifest=state.manifest,
        updated_at=reading.occurred_at,
        compaction_point_key=reading.compaction_point_key,
        compaction_point_tokens=reading.compaction_point_tokens,
    )


def _learn(state: ProjectionState | None, thread: ThreadState) -> ProjectionState | None:
    """Identity and the engine's preparation facts of the thread's cycle; a write only when one of them changed.

    The facts of the cycle before the current one are kept too: the engine may have counted a compaction (from its
    snapshot) before the projection sees that compaction's start, and its preparation is the earlier cycle's."""
    cycle = thread.last_compaction_at
    known: dict[str, object] = {
        "project_id": (state and state.project_id) or thread.project_id,
        "node_id": (state and state.node_id) or thread.node_id,
        "worker_id": thread.worker_id,  # the engine's: the first reporter, or the worker an operator moved it to
    }
    if state is None:
        return ProjectionState(
            thread_id=thread.thread_id, updated_at=thread.updated_at, **known, **_preparation(thread)
        )
    behind = state.cycle_started_at is not None and (cycle is None or cycle < state.cycle_started_at)
    if not behind:
        known |= _preparation(thread)
        if cycle != state.cycle_started_at:
            known |= {
                "previous_handoff_ready": state.handoff_ready,
                "previous_wrap_up_requested": state.wrap_up_requested,
            }
    if all(getattr(state, name) == value for name, value in known.items()):
        return None
    return state.model_copy(update=known)


def _preparation(thread: ThreadState) -> dict[str, object]:
    return {
        "handoff_ready": handoff.thread_ready(thread),
        "wrap_up_requested": thread.wrap_up_requested,
        "cycle_started_at": thread.last_compaction_at,
    }


def _identified(state: ProjectionState, event: SessionEvent) -> ProjectionState:
    update: dict[str, object] = {"node_id": event.node_id} if event.node_id is not None else {}
    if state.worker_id is None and event.worker_id is not None:
        update["worker_id"] = event.worker_id  # the first reporter's; only a move (the engine's state) changes it
    if isinstance(event, CompactionStarted):
        counted = state.cycle_started_at is not None and event.occurred_at <= state.cycle_started_at
        update["handoff_ready_at_compaction"] = state.previous_handoff_ready if counted else state.handoff_ready
        update["wrap_up_requested_at_compaction"] = (
            state.previous_wrap_up_requested if counted else state.wrap_up_requested
        )
    return state.model_copy(update=update) if update else state


def _finished(state: ProjectionState, completed: CompactionCompleted, profiles: ProfileSet) -> CompactionFinished:
    assert state.project_id is not None
    record = state.compactions[-1] if state.compactions else None
    model = state.sample.model if state.sample else None
    profile = profiles.for_model(model)
    return CompactionFinished(
        event_id=completed.event_id,
        thread_id=state.thread_id,
        project_id=state.project_id,
        trigger_mode=completed.trigger_mode,
        model=model,
        model_profile=profile.name,
        started_at=record.started_at if record else None,
        completed_at=completed.occurred_at,
        tokens_before=completed.tokens_before,
        tokens_after=completed.tokens_after,
        summary_token_count=record.summary_tokens if record else None,
        handoff_ready=state.handoff_ready_at_compaction,
        wrap_up_requested=state.wrap_up_requested_at_compaction,
        context_window_tokens=thread_window(state, profile),
        tool_version=state.sample.tool_version if state.sample else None,
    )
