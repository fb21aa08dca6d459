"""One batch of input records through the fold: decode, dead-letter what is invalid, route, fold, coalesce.

Still free of Faust: the agent hands in plain messages and a way to load a thread's slot, and gets back the slots to
write and the records to publish. Each thread's slot is written and its state published once per batch, however many
of its records the batch held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from core.engine_config import EngineConfig
from core.fleet_points import PointLookup, measured, no_points
from core.levels import policy_for
from core.precedence import Verdict
from core.topics import (
    ALERT_COMMANDS_BY_THREAD,
    HANDOFF_PACKAGES,
    MASTER_ACTION_COMMANDS,
    SESSION_EVENTS,
    SNAPSHOT_VERDICTS,
    SNAPSHOTS,
    THREAD_STATE,
)
from schemas import (
    SESSION_EVENT_ADAPTER,
    AlertCommand,
    Codec,
    CompactionStarted,
    CompactRequested,
    DecodeError,
    HandoffPackage,
    MasterActionCommand,
    SnapshotVerdict,
    ThreadContextSnapshot,
    ThreadWorkerMoved,
    ThresholdPolicy,
    WorkFactChanged,
)
from schemas.policy import DEFAULT_POLICY_PROJECT_ID
from streams.batching import BatchResult, InputMessage, dead_letter, fold_failure
from streams.engine.fold import (
    Emit,
    Step,
    ThreadSlot,
    apply_ack,
    apply_action_command,
    apply_compact_request,
    apply_compaction_started,
    apply_handoff,
    apply_snapshot,
    apply_work_fact,
    apply_worker_move,
    refusal,
    tick,
)

log = logging.getLogger(__name__)
TICK_FAILED = "tick_failed"
SNAPSHOT_CODEC = Codec(ThreadContextSnapshot)
EVENT_CODEC = Codec(SESSION_EVENT_ADAPTER)
HANDOFF_CODEC = Codec(HandoffPackage)
ALERT_COMMAND_CODEC = Codec(AlertCommand)
ACTION_COMMAND_CODEC = Codec(MasterActionCommand)
SLOT_CODEC = Codec(ThreadSlot)
ENGINE_EVENTS = (WorkFactChanged, CompactionStarted, CompactRequested, ThreadWorkerMoved)
"""The session events the engine folds (the others feed the projection)."""


def _decode(message: InputMessage) -> tuple[str, object] | None:
    """(thread id it belongs to, record), or None for a record the engine does not consume. Raises DecodeError."""
    if message.topic == SNAPSHOTS:
        snapshot = SNAPSHOT_CODEC.decode(message.value)
        return snapshot.thread_id, snapshot
    if message.topic == SESSION_EVENTS:
        try:
            event = EVENT_CODEC.decode(message.value)
        except DecodeError:
            return None  # the projection fold reads the same topic and dead-letters it, once
        # Usage samples, surface events and manifests feed the projection fold, not the engine.
        return (event.thread_id, event) if isinstance(event, ENGINE_EVENTS) else None
    if message.topic == HANDOFF_PACKAGES:
        package = HANDOFF_CODEC.decode(message.value)
        return package.from_thread_id, package
    if message.topic == ALERT_COMMANDS_BY_THREAD:
        command = ALERT_COMMAND_CODEC.decode(message.value)
        return command.thread_id, command
    if message.topic == MASTER_ACTION_COMMANDS:
        action_command = ACTION_COMMAND_CODEC.decode(message.value)
        return action_command.thread_id, action_command
    raise DecodeError("unknown_topic", f"the engine does not consume {message.topic}")


def _fold(
    slot: ThreadSlot | None, record: object, policy: ThresholdPolicy, now: datetime, config: EngineConfig
) -> Step:
    match record:
        case ThreadContextSnapshot():
            return apply_snapshot(slot, record, policy, now, config)
        case WorkFactChanged():
            return apply_work_fact(slot, record, now, config)
        case CompactionStarted():
            return apply_compaction_started(slot, record, now, config)
        case CompactRequested():
            return apply_compact_request(slot, record, now)
        case ThreadWorkerMoved():
            return apply_worker_move(slot, record, now)
        case HandoffPackage():
            return apply_handoff(slot, record, now, config)
        case AlertCommand():
            return apply_ack(slot, record, now)
        case MasterActionCommand():
            return apply_action_command(slot, record, now, config)
    raise TypeError(f"no fold for {type(record).__name__}")


def _project_of(record: object, slot: ThreadSlot | None) -> str | None:
    project = getattr(record, "project_id", None)
    return project or (slot.state.project_id if slot and slot.state else None)


def process_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ThreadSlot | None],
    lookup_policy: Callable[[str], ThresholdPolicy | None],
    now: datetime,
    config: EngineConfig,
    prefix: str,
    on_record: Callable[[str, object], None] | None = None,
    points: PointLookup = no_points,
) -> BatchResult[ThreadSlot]:
    """`on_record(thread_id, record)` sees each decoded record keyed by its thread, in batch order, before admission:
    the routing fused into this fold (`streams.engine.routing`) relays consumed packages without decoding them again.
    A snapshot that says its tokens is measured against the fleet's compaction point of its key (`points`); its
    verdict keeps it as the worker sent it."""
    result = BatchResult[ThreadSlot]()
    slots: dict[str, ThreadSlot | None] = {}
    for message in messages:
        try:
            decoded = _decode(message)
        except DecodeError as error:
            result.emits.append(dead_letter(message, error.reason, error.detail, now, prefix))
            continue
        if decoded is None:
            continue
        thread_id, record = decoded
        if message.key != thread_id.encode():
            # A record keyed by something else lands on a partition that does not own its thread's state.
            detail = f"key {message.key!r} is not the record's thread {thread_id!r}"
            result.emits.append(dead_letter(message, "key_mismatch", detail, now, prefix))
            continue
        if on_record is not None:
            on_record(thread_id, record)
        if thread_id not in slots:
            slots[thread_id] = load(thread_id)
        slot = slots[thread_id]
        refused = refusal(slot, record, message.timestamp or now)  # the receiver's clock when the log took it
        if refused is not None:
            result.emits.append(dead_letter(message, *refused, now, prefix))
            continue
        policy = policy_for(_project_of(record, slot) or DEFAULT_POLICY_PROJECT_ID, lookup_policy)
        try:
            folded = measured(record, points) if isinstance(record, ThreadContextSnapshot) else record
            step = _fold(slot, folded, policy, cause_time(message, slot, now), config)
        except Exception as error:  # a fold's own fault: the record is kept, see fold_failure
            fold_failure(message, error, result, now, prefix)
            continue
        _count_outcome(result, step)
        if isinstance(record, ThreadContextSnapshot) and step.verdict is not None:
            verdict = SnapshotVerdict(
                snapshot=record, accepted=step.verdict is Verdict.ACCEPT, verdict=step.verdict.value
            )
            result.emits.append(Emit(SNAPSHOT_VERDICTS, thread_id, verdict))
        if step.slot is not None:
            slots[thread_id] = result.states[thread_id] = step.slot
        result.emits.extend(step.emits)
    _publish_states(result)
    return result


def cause_time(message: InputMessage, slot: ThreadSlot | None, now: datetime) -> datetime:
    """The time a record's outputs carry: its own time in the log (the same on every replay, unlike the clock of the
    worker applying it), never before the thread's last change (readers order a thread's states by it)."""
    at = message.timestamp or now
    return max(at, slot.state.updated_at) if slot is not None and slot.state is not None else at


def _count_outcome(result: BatchResult[ThreadSlot], step: Step) -> None:
    if step.verdict is None:
        return
    if step.verdict is not Verdict.ACCEPT:
        result.outcomes[f"snapshot_{step.verdict}"] += 1
    elif step.slot and step.slot.state and step.slot.state.reported_level is not step.slot.state.context_budget_level:
        result.outcomes["level_mismatch"] += 1


def tick_all(slots: Iterable[tuple[str, ThreadSlot]], now: datetime, config: EngineConfig) -> BatchResult[ThreadSlot]:
    """The timer's pass over the threads this worker owns."""
    result = BatchResult[ThreadSlot]()
    for thread_id, slot in slots:
        try:
            step = tick(slot, now, config)
        except Exception:  # one thread's fault must not stop every other thread's timer
            log.exception("timer failed on thread %s", thread_id)
            result.outcomes[TICK_FAILED] += 1
            continue
        if step.slot is not None:
            result.states[thread_id] = step.slot
            result.emits.extend(step.emits)
    _publish_states(result)
    return result


def _publish_states(result: BatchResult[ThreadSlot]) -> None:
    for thread_id, slot in result.states.items():
        if slot.state is not None:
            result.emits.append(Emit(THREAD_STATE, thread_id, slot.state))
