"""A handoff the master asks for (issue 21): a prepare_handoff of the current cycle, whatever the level, that clears
like the level's own (a ready package for the cycle), and ends with the cycle."""

from __future__ import annotations

from core.engine_config import EngineConfig
from schemas import MasterAction, MasterActionCommand, ThreadMasterActionIssued
from streams.engine.fold import apply_action_command, apply_handoff
from tests.unit.engine.builders import at, package
from tests.unit.engine.test_fold import Thread

CONFIG = EngineConfig()
A = MasterAction


def handoff_request(action_id: str, seconds: float, action: MasterAction | None = A.PREPARE_HANDOFF):
    return MasterActionCommand(
        action_id=action_id,
        thread_id="thread-a",
        command="request",
        action=action,
        issued_by="kris",
        issued_at=at(seconds),
        note="spec 8.2: critical with unsaved tests",
    )


def by_topic(emits, topic: str) -> list:
    return [emit.record for emit in emits if emit.topic == topic]


def test_a_request_on_a_safe_thread_issues_prepare_handoff_under_its_id_and_says_so() -> None:
    thread = Thread()
    thread.snap(90, 0)
    assert [item.action for item in thread.state.master_actions] == [A.REFRESH_STAGE_SUMMARY]
    emits = thread.feed(apply_action_command(thread.slot, handoff_request("req-1", 5), at(5), CONFIG))
    [record] = by_topic(emits, "master-actions")
    assert (record.action_id, record.actions, record.state.value) == ("req-1", [A.PREPARE_HANDOFF], "issued")
    assert (record.changed_by, record.state_reason) == ("kris", "spec 8.2: critical with unsaved tests")
    issued = [e for e in by_topic(emits, "client-events") if isinstance(e, ThreadMasterActionIssued)]
    assert [e.action_id for e in issued] == ["req-1"]
    required = [e for e in by_topic(emits, "client-events") if e.event_type == "thread.handoff.required"]
    assert len(required) == 1  # the thread now owes a package: 6.2 lists it among those requiring handoff
    open_ones = [(item.action_id, item.action) for item in thread.state.master_actions if item.open]
    assert open_ones == [
        (thread.state.master_actions[0].action_id, A.REFRESH_STAGE_SUMMARY),
        ("req-1", A.PREPARE_HANDOFF),
    ]
    assert A.PREPARE_HANDOFF in thread.state.due_actions


def test_the_requested_action_stays_due_through_later_snapshots_and_a_ready_package_clears_it() -> None:
    thread = Thread()
    thread.snap(90, 0)
    thread.feed(apply_action_command(thread.slot, handoff_request("req-1", 5), at(5), CONFIG))
    assert by_topic(thread.snap(88, 10), "master-actions") == []  # not superseded by a safe level's derivation
    emits = thread.feed(apply_handoff(thread.slot, package(seconds=12), at(12), CONFIG))
    [done] = by_topic(emits, "master-actions")
    assert (done.action_id, done.state.value, done.state_reason) == ("req-1", "done", "handoff_ready")


def test_a_repeat_while_open_changes_nothing_and_a_compaction_ends_the_request() -> None:
    thread = Thread()
    thread.snap(90, 0)
    thread.feed(apply_action_command(thread.slot, handoff_request("req-1", 5), at(5), CONFIG))
    assert apply_action_command(thread.slot, handoff_request("req-2", 6), at(6), CONFIG).slot is None
    emits = thread.snap(95, 20, compactions=1)
    superseded = [(r.action_id, r.state.value) for r in by_topic(emits, "master-actions") if r.action_id == "req-1"]
    assert superseded == [("req-1", "superseded")]
    assert thread.state.requested_actions == []
    assert A.PREPARE_HANDOFF not in thread.state.due_actions


def test_only_prepare_handoff_can_be_requested_and_an_unknown_thread_is_unchanged() -> None:
    thread = Thread()
    assert apply_action_command(None, handoff_request("req-0", 0), at(0), CONFIG).slot is None
    thread.snap(90, 0)
    for action in (A.COMPACT_NOW, A.FORBID_CONTEXT_GROWTH, None):
        assert apply_action_command(thread.slot, handoff_request("req-x", 1, action), at(1), CONFIG).slot is None


def test_a_request_after_the_cycles_package_was_consumed_issues_a_new_one() -> None:
    thread = Thread()
    thread.snap(55, 0)  # watch: prepare_handoff issued by the level
    thread.feed(apply_handoff(thread.slot, package(seconds=2), at(2), CONFIG))  # done by the ready package
    consumed = package("consumed", seconds=4)
    thread.feed(apply_handoff(thread.slot, consumed, at(4), CONFIG))
    emits = thread.feed(apply_action_command(thread.slot, handoff_request("req-3", 6), at(6), CONFIG))
    assert [(r.action_id, r.state.value) for r in by_topic(emits, "master-actions")] == [("req-3", "issued")]
