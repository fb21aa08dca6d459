"""Before folding, the engine refuses records that would take a thread into another project or carry an implausible
time or version: they are dead-lettered with a reason, and the thread is untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, ThreadWorkerMoved, WorkFact
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.engine.fold import ThreadSlot, apply_snapshot
from tests.unit.engine.builders import T0, package, snapshot, work_fact

NOW = T0 + timedelta(minutes=1)
CONFIG = EngineConfig()


def message(topic: str, record: object, key: str = "thread-a") -> InputMessage:
    return InputMessage(topic, 0, 0, key.encode(), encode_record(record))  # type: ignore[arg-type]


def owned_slot() -> ThreadSlot:
    step = apply_snapshot(None, snapshot(20, project="proj-b", version=1), DEFAULT_POLICY, NOW, CONFIG)
    assert step.slot is not None
    return step.slot


def run(*messages: InputMessage, slot: ThreadSlot | None = None):
    return process_batch(messages, lambda _: slot, lambda _: None, NOW, CONFIG, "ctx.")


def letters(result) -> list[tuple[str, str]]:
    return [(e.record.reason, e.record.source_topic) for e in result.emits if e.topic == "deadletter"]


def test_a_snapshot_naming_another_project_than_the_threads_is_dead_lettered_and_changes_nothing() -> None:
    takeover = snapshot(99, project="proj-a", version=2, seconds=10)
    result = run(message("snapshots", takeover), slot=owned_slot())
    assert letters(result) == [("project_mismatch", "ctx.snapshots")]
    assert result.states == {}


def test_a_package_or_event_naming_another_project_is_dead_lettered() -> None:
    hijack = package().model_copy(update={"project_id": "proj-a"})
    event = work_fact(WorkFact.UNCOMMITTED_PATCH).model_copy(update={"project_id": "proj-a"})
    result = run(message("handoff-packages", hijack), message("session-events", event), slot=owned_slot())
    assert letters(result) == [("project_mismatch", "ctx.handoff-packages"), ("project_mismatch", "ctx.session-events")]
    assert result.states == {}


def test_the_threads_own_project_is_folded() -> None:
    result = run(message("snapshots", snapshot(10, project="proj-b", version=2, seconds=10)), slot=owned_slot())
    assert letters(result) == []
    assert result.states["thread-a"].state.context_budget_remaining_pct == 10


def test_a_snapshot_dated_far_from_the_engines_clock_is_dead_lettered() -> None:
    for captured_at in (datetime(9999, 1, 1, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC), NOW + timedelta(hours=1)):
        dated = snapshot(50, version=1).model_copy(update={"captured_at": captured_at})
        [(reason, _)] = letters(run(message("snapshots", dated)))
        assert reason == "implausible_time", captured_at


def test_a_version_far_ahead_of_its_capture_time_is_dead_lettered() -> None:
    frozen = snapshot(99, version=2**53)
    assert letters(run(message("snapshots", frozen))) == [("implausible_time", "ctx.snapshots")]


def test_the_dead_letter_says_why() -> None:
    result = run(message("snapshots", snapshot(99, project="proj-a", version=2)), slot=owned_slot())
    [letter] = [e.record for e in result.emits if e.topic == "deadletter"]
    assert "proj-b" in letter.detail


def moved(to: str, from_: str = "worker-mac-01", event_id: str = "move-1") -> ThreadWorkerMoved:
    return ThreadWorkerMoved(
        thread_id="thread-a",
        event_id=event_id,
        occurred_at=NOW,
        project_id="proj-b",
        from_worker_id=from_,
        to_worker_id=to,
        moved_by="ops",
        reason="worker-mac-01 retired",
    )


def test_a_snapshot_or_event_naming_another_worker_of_the_project_is_dead_lettered() -> None:
    takeover = snapshot(99, project="proj-b", version=2, seconds=10).model_copy(update={"worker_id": "worker-b"})
    event = work_fact(WorkFact.UNCOMMITTED_PATCH).model_copy(update={"project_id": "proj-b", "worker_id": "worker-b"})
    result = run(message("snapshots", takeover), message("session-events", event), slot=owned_slot())
    assert letters(result) == [("worker_mismatch", "ctx.snapshots"), ("worker_mismatch", "ctx.session-events")]
    assert result.states == {}


def test_an_operators_move_hands_the_thread_to_the_new_worker_whose_reports_then_count() -> None:
    newcomer = snapshot(60, project="proj-b", version=1, seconds=20).model_copy(update={"worker_id": "worker-b"})
    result = run(message("session-events", moved("worker-b")), message("snapshots", newcomer), slot=owned_slot())
    assert letters(result) == []
    state = result.states["thread-a"].state
    assert (state.worker_id, state.context_budget_remaining_pct) == ("worker-b", 60)  # version 1 counts afresh
    [move] = [e.record for e in result.emits if e.topic == "context-events" and e.record.reason == "worker_moved"]
    assert move.event_id.startswith("thread-a:move-1")
    old = snapshot(10, project="proj-b", version=9, seconds=30)  # the old worker's, after the move
    assert letters(run(message("snapshots", old), slot=result.states["thread-a"])) == [
        ("worker_mismatch", "ctx.snapshots")
    ]


def test_a_stale_move_or_one_of_an_unknown_thread_is_dead_lettered() -> None:
    assert letters(run(message("session-events", moved("worker-c", from_="worker-x")), slot=owned_slot())) == [
        ("worker_mismatch", "ctx.session-events")
    ]
    assert letters(run(message("session-events", moved("worker-c")))) == [("thread_unknown", "ctx.session-events")]
