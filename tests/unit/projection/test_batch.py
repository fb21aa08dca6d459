"""The projection over a batch: readings become estimator snapshots for the engine, with the thread's identity."""

from __future__ import annotations

from core.engine_config import EngineConfig
from core.profiles import ProfileSet
from core.topics import SESSION_EVENTS, THREAD_STATE
from schemas import SourceKind, ThreadContextSnapshot
from schemas.codec import encode_record
from schemas.events import CompactionFinished
from schemas.policy import DEFAULT_POLICY
from schemas.projection import ProjectionState
from streams.batching import InputMessage
from streams.engine.fold import apply_handoff, apply_snapshot
from streams.projection.batch import Projection, projection_batch
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from tests.unit.engine.builders import at as engine_at
from tests.unit.engine.builders import package, snapshot
from tests.unit.projection.builders import T0, THREAD, at, compact_requested, completed, message, started, usage

PROJECTION = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), {}.get)


def _run(records, states: dict[str, ProjectionState] | None = None):
    states = {} if states is None else states
    messages = [
        InputMessage(SESSION_EVENTS if not hasattr(r, "context_budget_level") else THREAD_STATE, 0, i,
                     THREAD.encode(), encode_record(r))
        for i, r in enumerate(records)
    ]  # fmt: skip
    result = projection_batch(messages, states.get, T0, PROJECTION, "ctx.")
    states.update(result.states)
    return result


def _identified(event):
    return event.model_copy(update={"project_id": "proj-1", "node_id": "node-1", "worker_id": "worker-mac-01"})


def test_a_reading_becomes_an_estimator_snapshot_with_the_events_identity() -> None:
    result = _run([_identified(usage(200_000, model="gpt-5-codex", window=272_000))])
    [emit] = [e for e in result.emits if e.topic == "snapshots"]
    snap = emit.record
    assert isinstance(snap, ThreadContextSnapshot)
    assert (snap.source_kind, snap.node_id, snap.worker_id, snap.project_id) == (
        SourceKind.WORKER_ESTIMATOR,
        "node-1",
        "worker-mac-01",
        "proj-1",
    )
    assert (snap.snapshot_version, snap.snapshot_id) == (1, f"{THREAD}:proj:1")


def test_without_an_identity_no_snapshot_is_published_until_the_engine_state_gives_one() -> None:
    states: dict[str, ProjectionState] = {}
    first = _run([usage(200_000, model="gpt-5-codex", window=272_000)], states)
    assert not [e for e in first.emits if e.topic == "snapshots"]
    engine_state = apply_snapshot(None, snapshot(pct=50.0), DEFAULT_POLICY, T0, EngineConfig()).slot.state
    _run([engine_state], states)
    assert states[THREAD].node_id == engine_state.node_id
    later = _run([usage(240_000, 30, model="gpt-5-codex", window=272_000)], states)
    [emit] = [e for e in later.emits if e.topic == "snapshots"]
    assert emit.record.worker_id == engine_state.worker_id


def test_a_compaction_publishes_a_snapshot_at_once_and_a_finished_compaction_record() -> None:
    states: dict[str, ProjectionState] = {}
    _run([_identified(usage(230_000, model="gpt-5-codex", window=272_000)), _identified(message(1_000, 5))], states)
    result = _run([_identified(started(10)), _identified(completed(20, before=231_000, after=9_000))], states)
    [snap] = [e.record for e in result.emits if e.topic == "snapshots"]
    assert snap.compaction_count == 1
    assert snap.context_budget_remaining_pct > 90
    [finished] = [e.record for e in result.emits if e.topic == "compactions"]
    assert isinstance(finished, CompactionFinished)
    assert (finished.tokens_before, finished.tokens_after, finished.started_at) == (231_000, 9_000, at(10))
    assert finished.handoff_ready is False


def test_a_manual_compaction_request_is_the_engines_not_the_projections() -> None:
    result = _run([_identified(compact_requested(3))])
    assert [e for e in result.emits if e.topic == "master-actions"] == []


def test_an_invalid_session_event_is_dead_lettered_with_its_bytes() -> None:
    bad = InputMessage(SESSION_EVENTS, 2, 9, THREAD.encode(), b'{"type": "usage_sample"}')
    result = projection_batch([bad], {}.get, T0, PROJECTION, "ctx.")
    [emit] = result.emits
    assert emit.topic == "deadletter"
    assert (emit.record.source_topic, emit.record.offset, emit.record.original_value) == (
        "ctx.session-events",
        9,
        b'{"type": "usage_sample"}',
    )


def _engine_thread(*inputs):
    """The engine's thread state after feeding it (snapshot pct, seconds, compactions) or a package."""
    slot, config = None, EngineConfig()
    for item in inputs:
        if isinstance(item, tuple):
            pct, seconds, compactions = item
            snap = snapshot(pct, seconds=seconds, compactions=compactions, must_finish=True)
            step = apply_snapshot(slot, snap, DEFAULT_POLICY, engine_at(seconds), config)
        else:
            step = apply_handoff(slot, item, engine_at(item.created_at.second), config)
        slot = step.slot or slot
    return slot.state


def _compaction_record(states, *records):
    _run([_identified(usage(230_000, model="gpt-5-codex", window=272_000))], states)
    result = _run([r if hasattr(r, "context_budget_level") else _identified(r) for r in records], states)
    [finished] = [e.record for e in result.emits if e.topic == "compactions"]
    return finished


def test_a_wrap_up_request_is_recorded_beside_the_missing_ready_package() -> None:
    critical = _engine_thread((20, 1, 0))  # critical: wrap-up requested, no package
    finished = _compaction_record({}, critical, started(10), completed(20, before=231_000, after=9_000))
    assert (finished.wrap_up_requested, finished.handoff_ready) == (True, False)


def test_a_package_of_an_earlier_cycle_does_not_count_as_ready_at_compaction() -> None:
    used_up = _engine_thread((20, 1, 0), package(seconds=2), (90, 5, 1))  # the package predates compaction 1
    assert used_up.handoff.package_status.value == "ready"
    finished = _compaction_record({}, used_up, started(10), completed(20, before=231_000, after=9_000))
    assert finished.handoff_ready is False


def test_the_ending_cycle_counts_when_the_engine_saw_the_compaction_first() -> None:
    prepared = _engine_thread((20, 1, 0), package(seconds=2))
    after = _engine_thread((20, 1, 0), package(seconds=2), (90, 12, 1))  # compaction 1 at 12 s, counted already
    states: dict[str, ProjectionState] = {}
    finished = _compaction_record(states, prepared, after, started(10), completed(12, before=231_000, after=9_000))
    assert (finished.handoff_ready, finished.wrap_up_requested) == (True, True)


def test_an_event_without_identity_is_dead_lettered_and_the_next_one_after_the_thread_state_publishes() -> None:
    states: dict[str, ProjectionState] = {}
    first = _run([usage(200_000, model="gpt-5-codex", window=272_000)], states)
    [letter] = [e.record for e in first.emits if e.topic == "deadletter"]
    assert letter.reason == "identity_unknown"
    assert "node_id" in letter.detail
    assert letter.original_key == THREAD.encode()
    assert not [e for e in first.emits if e.topic == "snapshots"]
    engine_state = apply_snapshot(None, snapshot(pct=50.0), DEFAULT_POLICY, T0, EngineConfig()).slot.state
    _run([engine_state], states)
    later = _run([message(10, 1)], states)  # far below the reading step: published because none was yet
    [emit] = [e for e in later.emits if e.topic == "snapshots"]
    assert (emit.record.node_id, emit.record.snapshot_version) == (engine_state.node_id, 1)
    assert not [e for e in later.emits if e.topic == "deadletter"]


def test_another_workers_events_do_not_take_the_threads_budget_over_and_estimates_keep_the_owner() -> None:
    states: dict[str, ProjectionState] = {}
    _run([_identified(usage(100_000, model="gpt-5-codex", window=272_000))], states)
    intruder = {"worker_id": "worker-b"}
    result = _run([_identified(message(200_000, 5)).model_copy(update=intruder)], states)
    assert [(e.record.reason, e.topic) for e in result.emits] == [("worker_mismatch", "deadletter")]
    assert states[THREAD].worker_id == "worker-mac-01"
    later = _run([_identified(usage(120_000, 10, model="gpt-5-codex", window=272_000))], states)
    [emit] = [e for e in later.emits if e.topic == "snapshots"]
    assert emit.record.worker_id == "worker-mac-01"  # the engine would refuse an estimate named after worker-b


def test_the_projection_follows_the_engines_worker_after_a_move() -> None:
    states: dict[str, ProjectionState] = {}
    _run([_identified(usage(100_000, model="gpt-5-codex", window=272_000))], states)
    engine_state = apply_snapshot(None, snapshot(pct=50.0), DEFAULT_POLICY, T0, EngineConfig()).slot.state
    _run([engine_state.model_copy(update={"worker_id": "worker-b"})], states)
    later = _run(
        [
            _identified(usage(120_000, 10, model="gpt-5-codex", window=272_000)).model_copy(
                update={"worker_id": "worker-b"}
            )
        ],
        states,
    )
    [emit] = [e for e in later.emits if e.topic == "snapshots"]
    assert emit.record.worker_id == "worker-b"
