"""Master actions with a lifecycle (issue 21): issued -> acknowledged -> done, or superseded; satisfied by a package."""

from __future__ import annotations

from core.engine_config import EngineConfig
from core.topics import MASTER_ACTION_COMMANDS
from schemas import DEFAULT_POLICY, MasterAction, MasterActionRecord, ThreadMasterActionIssued
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.engine.fold import apply_action_command, apply_handoff
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
