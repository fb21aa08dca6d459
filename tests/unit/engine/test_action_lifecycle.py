"""Master actions with a lifecycle (issue 21): issued -> acknowledged -> done, or superseded; satisfied by a package."""

from __future__ import annotations

from core.action_lifecycle import still_owed
from core.engine_config import EngineConfig
from core.topics import MASTER_ACTION_COMMANDS, SESSION_EVENTS
from schemas import DEFAULT_POLICY, CompactRequested, MasterAction, MasterActionRecord, ThreadMasterActionIssued
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.engine.fold import apply_action_command, apply_compact_request, apply_handoff
from tests.unit.engine.builders import action_command, at, package
from tests.unit.engine.test_fold import Thread

CONFIG = EngineConfig()
A = MasterAction


def states(thread: Thread) -> dict[str, str]:
    return {item.action.value: item.state.value for item in thread.state.master_actions}


def records(emits) -> list[MasterActionRecord]:
    return [emit.record for emit in emits if emit.topic == "master-actions"]


def action_id(thread: Thread, action: MasterAction) -> str:
    return next(item.action_id for item in thread.state.master_actions if item.action is action)


def test_a_ready_package_does_prepare_handoff_and_it_is_not_issued_again_at_urgent() -> None:
    thread = Thread()
    thread.snap(80, 0)
    thread.snap(55, 10)
    assert states(thread) == {"prepare_handoff": "issued", "avoid_large_context_append": "issued"}
    emits = thread.feed(apply_handoff(thread.slot, package(seconds=12), at(12), CONFIG))
    [done] = records(emits)
    assert (done.actions, done.state.value, done.state_reason, done.changed_by) == (
        [A.PREPARE_HANDOFF],
        "done",
        "handoff_ready",
        "engine",
    )
    assert done.issued_at == at(10)
    assert done.state_changed_at == at(12)
    issued = records(thread.snap(35, 20))
    assert [r.actions[0] for r in issued] == [A.FINISH_ATOMIC_SUBTASK, A.PRECREATE_RELAY_THREAD]
    assert states(thread)["prepare_handoff"] == "done"


def test_an_action_issued_while_a_package_is_ready_is_done_at_once() -> None:
    thread = Thread()
    thread.snap(80, 0)
    thread.feed(apply_handoff(thread.slot, package(seconds=5), at(5), CONFIG))
    emits = records(thread.snap(55, 10))
    prepare = [(r.state.value, r.state_reason) for r in emits if r.actions == [A.PREPARE_HANDOFF]]
    assert prepare == [("issued", "level watch"), ("done", "handoff_ready")]


def test_ack_then_done_move_forward_only_and_name_who_moved_them() -> None:
    thread = Thread()
    thread.snap(35, 0)
    target = action_id(thread, A.FINISH_ATOMIC_SUBTASK)
    [acked] = records(
        thread.feed(apply_action_command(thread.slot, action_command(target, by="worker-1"), at(1), CONFIG))
    )
    assert (acked.state.value, acked.changed_by, acked.state_changed_at) == ("acknowledged", "worker-1", at(1))
    assert apply_action_command(thread.slot, action_command(target), at(2), CONFIG).slot is None  # a repeated ack
    [done] = records(thread.feed(apply_action_command(thread.slot, action_command(target, "done"), at(3), CONFIG)))
    assert done.state.value == "done"
    assert done.issued_at == at(0)
    assert (
        apply_action_command(thread.slot, action_command(target, "ack"), at(4), CONFIG).slot is None
    )  # ack after done
    assert apply_action_command(thread.slot, action_command("no-such-action", "done"), at(4), CONFIG).slot is None


def test_done_works_from_issued_and_stays_done_while_the_level_holds() -> None:
    thread = Thread()
    thread.snap(35, 0)
    target = action_id(thread, A.PRECREATE_RELAY_THREAD)
    thread.feed(apply_action_command(thread.slot, action_command(target, "done"), at(1), CONFIG))
    assert records(thread.snap(33, 10)) == []
    assert states(thread)["precreate_relay_thread"] == "done"


def test_level_change_supersedes_open_actions_no_longer_due_and_compaction_supersedes_the_rest() -> None:
    thread = Thread()
    thread.snap(35, 0)
    superseded = records(thread.snap(55, 10))  # back to watch
    assert sorted(r.actions[0].value for r in superseded if r.state.value == "superseded") == [
        "finish_atomic_subtask",
        "precreate_relay_thread",
    ]
    assert set(states(thread)) == {"prepare_handoff", "avoid_large_context_append"}
    compacted = records(thread.snap(90, 20, compactions=1))
    assert [(r.actions[0].value, r.state.value, r.state_reason) for r in compacted] == [
        ("prepare_handoff", "superseded", "compacted"),
        ("avoid_large_context_append", "superseded", "compacted"),
        ("refresh_stage_summary", "issued", "level safe"),
    ]
    assert states(thread) == {"refresh_stage_summary": "issued"}


def test_each_issue_is_also_a_client_event_with_the_action_id() -> None:
    thread = Thread()
    emits = thread.snap(55, 0)
    events = [e.record for e in emits if isinstance(e.record, ThreadMasterActionIssued)]
    assert [(e.action, e.action_id) for e in events] == [
        (item.action, item.action_id) for item in thread.state.master_actions
    ]
    assert all(e.event_id == f"{e.action_id}:issued" and e.project_id == "proj-1" for e in events)
    assert len({e.action_id for e in events}) == 2


def test_commands_arrive_on_their_topic_keyed_by_thread_and_a_wrong_key_is_dead_lettered() -> None:
    thread = Thread()
    thread.snap(55, 0)
    target = action_id(thread, A.AVOID_LARGE_CONTEXT_APPEND)
    value = action_command(target, "done").model_dump_json().encode()
    good = InputMessage(MASTER_ACTION_COMMANDS, 0, 7, b"thread-a", value)
    bad = InputMessage(MASTER_ACTION_COMMANDS, 0, 8, b"thread-b", value)
    result = process_batch([bad, good], lambda _: thread.slot, lambda _: DEFAULT_POLICY, at(1), CONFIG, "ctx.")
    assert [e.record.reason for e in result.emits if e.topic == "deadletter"] == ["key_mismatch"]
    [done] = [e.record for e in result.emits if e.topic == "master-actions"]
    assert (done.action_id, done.state.value) == (target, "done")
    assert result.states["thread-a"].state.master_actions[1].state.value == "done"


def _compact_request(thread: Thread, seconds: float, event_id: str = "req-1") -> list:
    request = CompactRequested(
        thread_id="thread-a", event_id=event_id, occurred_at=at(seconds), project_id="proj-1", requested_by="kris"
    )
    return thread.feed(apply_compact_request(thread.slot, request, at(seconds)))


def test_a_manual_compaction_request_issues_compact_now_whatever_the_level() -> None:
    thread = Thread()
    thread.snap(90, 0)
    [issued] = records(_compact_request(thread, 5))
    assert (issued.action_id, issued.actions, issued.state.value) == (
        "thread-a:compact_now:req-1",
        [A.COMPACT_NOW],
        "issued",
    )
    assert (issued.reason, issued.state_reason, issued.changed_by) == ("manual request", "requested by kris", "engine")
    moved = records(thread.snap(55, 10)) + records(thread.snap(95, 20))  # the level's actions come and go
    assert {r.state.value for r in moved if r.actions != [A.COMPACT_NOW]} == {"issued", "superseded"}
    assert [r for r in moved if r.actions == [A.COMPACT_NOW]] == []
    assert states(thread)["compact_now"] == "issued"


def test_compact_now_is_done_when_the_threads_compaction_is_observed_and_the_level_actions_superseded() -> None:
    thread = Thread()
    thread.snap(35, 0)
    _compact_request(thread, 5)
    ack = action_command("thread-a:compact_now:req-1", "ack", seconds=6)
    [acked] = records(thread.feed(apply_action_command(thread.slot, ack, at(6), CONFIG)))
    assert (acked.state.value, acked.changed_by) == ("acknowledged", "master")
    ended = [r for r in records(thread.snap(95, 10, compactions=1)) if r.state_reason == "compacted"]
    assert {(r.actions[0], r.state.value) for r in ended if r.actions == [A.COMPACT_NOW]} == {(A.COMPACT_NOW, "done")}
    assert {r.state.value for r in ended if r.actions != [A.COMPACT_NOW]} == {"superseded"}
    assert "compact_now" not in states(thread)


def test_a_request_before_the_threads_first_snapshot_is_kept_and_issued_with_that_snapshot() -> None:
    thread = Thread()
    assert _compact_request(thread, 1) == []
    assert thread.slot is not None  # kept, not dropped: the request and the first report travel on different topics
    assert _compact_request(thread, 1) == []  # a repeat
    [issued] = [r for r in records(thread.snap(90, 2)) if r.actions == [A.COMPACT_NOW]]
    assert (issued.action_id, issued.state.value) == ("thread-a:compact_now:req-1", "issued")
    assert states(thread)["compact_now"] == "issued"
    assert thread.slot.early_compact_request is None
    assert [r for r in records(thread.snap(85, 3)) if r.actions == [A.COMPACT_NOW]] == []  # issued once


def test_a_newer_request_supersedes_the_open_one_and_a_repeat_changes_nothing() -> None:
    thread = Thread()
    thread.snap(90, 0)
    _compact_request(thread, 1, "req-1")
    assert _compact_request(thread, 2, "req-1") == []
    moved = [(r.action_id, r.state.value, r.state_reason) for r in records(_compact_request(thread, 3, "req-2"))]
    assert moved == [
        ("thread-a:compact_now:req-1", "superseded", "newer_request"),
        ("thread-a:compact_now:req-2", "issued", "requested by kris"),
    ]
    held = [item.action_id for item in thread.state.master_actions if item.action is A.COMPACT_NOW]
    assert held == ["thread-a:compact_now:req-2"]


def test_a_request_for_a_thread_the_engine_does_not_know_issues_nothing() -> None:
    assert records(_compact_request(Thread(), 0)) == []


def test_the_worker_is_owed_an_open_compact_now_until_it_is_done() -> None:
    thread = Thread()
    thread.snap(90, 0)
    _compact_request(thread, 1)
    owed, items = still_owed([], thread.state.master_actions)  # a level asking nothing of the thread
    assert (owed, [i.action for i in items]) == ([A.COMPACT_NOW], [A.COMPACT_NOW])
    done = action_command("thread-a:compact_now:req-1", "done", seconds=2)
    thread.feed(apply_action_command(thread.slot, done, at(2), CONFIG))
    assert still_owed([], thread.state.master_actions) == ([], [])


def test_the_engine_batch_takes_compact_requested_from_session_events() -> None:
    thread = Thread()
    thread.snap(90, 0)
    request = CompactRequested(
        thread_id="thread-a", event_id="req-9", occurred_at=at(4), project_id="proj-1", requested_by="kris"
    )
    message = InputMessage(SESSION_EVENTS, 0, 0, b"thread-a", encode_record(request), timestamp=at(4))
    result = process_batch([message], {"thread-a": thread.slot}.get, lambda _: DEFAULT_POLICY, at(4), CONFIG, "")
    assert [r.action_id for r in records(result.emits)] == ["thread-a:compact_now:req-9"]
