"""The per-thread fold: exact outputs for the spec's level walk, must-finish, handoffs, staleness and spec 9.5."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from core import handoff
from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, AlertStatus, ContextAlert, MasterAction, WorkFact
from streams.engine.fold import (
    Emit,
    Step,
    ThreadSlot,
    apply_ack,
    apply_compaction_started,
    apply_handoff,
    apply_snapshot,
    apply_work_fact,
    tick,
)
from tests.unit.engine.builders import ack, at, compaction_started, package, snapshot, work_fact

CONFIG = EngineConfig()


class Thread:
    """Feeds inputs to one thread's slot and keeps every record it emitted, as the topology would."""

    def __init__(self) -> None:
        self.slot: ThreadSlot | None = None
        self.emitted: list[Emit] = []

    def feed(self, step: Step) -> list[Emit]:
        if step.slot is not None:
            self.slot = step.slot
        self.emitted += step.emits
        return step.emits

    def snap(self, pct: float, seconds: float, **kwargs) -> list[Emit]:
        return self.feed(
            apply_snapshot(self.slot, snapshot(pct, seconds=seconds, **kwargs), DEFAULT_POLICY, at(seconds), CONFIG)
        )

    @property
    def state(self):
        return self.slot.state


def describe(emits: Iterable[Emit]) -> list[str]:
    out = []
    for emit in emits:
        record = emit.record
        if emit.topic == "alerts":
            out.append(f"alert {record.alert_type.value} {record.alert_status.value}")
        elif emit.topic == "master-actions" and record.state.value == "issued":
            # the actions one input issues, on one line
            issued = ",".join(a.value for a in record.actions)
            out[-1:] = (
                [out[-1] + "," + issued] if out and out[-1].startswith("actions ") else [*out[-1:], "actions " + issued]
            )
        elif emit.topic == "master-actions":
            out.append(f"action {record.actions[0].value} {record.state.value} ({record.state_reason})")
        elif record.event_type.value == "thread.master_action.issued":
            continue  # mirrors the issued record, asserted in the lifecycle tests
        else:
            out.append(record.event_type.value)
    return out


def test_level_walk_with_handoff_and_compaction_emits_exactly_this() -> None:
    thread = Thread()
    assert describe(thread.snap(80, 0)) == ["thread.context.updated", "actions refresh_stage_summary"]
    assert describe(thread.snap(55, 10)) == [
        "thread.context.updated",
        "thread.context.level_changed",
        "alert context_watch opened",
        "action refresh_stage_summary superseded (level_changed)",
        "actions prepare_handoff,avoid_large_context_append",
        "thread.handoff.required",
    ]
    assert describe(thread.snap(35, 20)) == [
        "thread.context.updated",
        "thread.context.level_changed",
        "alert context_watch resolved",
        "alert context_urgent opened",
        "actions finish_atomic_subtask,precreate_relay_thread",
    ]
    assert describe(thread.snap(20, 30, must_finish=True)) == [
        "thread.context.updated",
        "thread.context.level_changed",
        "thread.context.compaction_risk_opened",
        "alert context_urgent resolved",
        "alert context_critical opened",
        "alert compaction_risk opened",
        "action avoid_large_context_append superseded (level_changed)",
        "action finish_atomic_subtask superseded (level_changed)",
        "actions pre_compaction_wrap_up,forbid_context_growth",
    ]
    assert thread.state.must_finish_before_compaction
    assert describe(thread.feed(apply_handoff(thread.slot, package(seconds=35), at(35), CONFIG))) == [
        "thread.handoff.ready",
        "thread.context.compaction_risk_resolved",
        "alert compaction_risk resolved",
        "action prepare_handoff done (handoff_ready)",
    ]
    assert describe(thread.snap(85, 50, compactions=1)) == [
        "thread.context.updated",
        "action pre_compaction_wrap_up superseded (compacted)",
        "action forbid_context_growth superseded (compacted)",
        "action precreate_relay_thread superseded (compacted)",
        "thread.context.level_changed",
        "alert context_critical resolved",
        "actions refresh_stage_summary",
    ]
    assert thread.state.open_alerts == []
    assert not thread.state.compaction_unprepared


def test_level_changed_carries_both_levels_and_stable_ids() -> None:
    thread = Thread()
    thread.snap(80, 0, version=1)
    emits = thread.snap(50, 10, version=2)
    changed = next(e.record for e in emits if e.record.event_type.value == "thread.context.level_changed")
    assert (changed.previous_level.value, changed.context_budget_level.value) == ("safe", "watch")
    assert changed.event_id == "thread-a:thread-a-codex_app_server-2:level_changed"


def test_no_outputs_while_the_level_holds() -> None:
    thread = Thread()
    thread.snap(80, 0)
    assert describe(thread.snap(75, 10)) == ["thread.context.updated"]
    assert describe(thread.snap(70, 20)) == ["thread.context.updated"]


def test_reported_level_is_kept_and_a_mismatch_is_counted() -> None:
    thread = Thread()
    thread.snap(37, 0, reported="watch")
    assert thread.state.reported_level.value == "watch"
    assert thread.state.context_budget_level.value == "urgent"
    assert thread.state.level_mismatches == 1


def test_work_facts_drive_must_finish_until_resolved() -> None:
    thread = Thread()
    thread.snap(70, 0)

    def fact(kind: WorkFact, active: bool, second: float) -> Step:
        return thread.feed(apply_work_fact(thread.slot, work_fact(kind, active, seconds=second), at(second), CONFIG))

    fact(WorkFact.UNCOMMITTED_PATCH, True, 1)
    fact(WorkFact.AWAITING_CROSS_NODE_REPLY, True, 2)
    assert thread.state.must_finish_before_compaction
    fact(WorkFact.UNCOMMITTED_PATCH, False, 3)
    assert thread.state.must_finish_before_compaction
    fact(WorkFact.AWAITING_CROSS_NODE_REPLY, False, 4)
    assert not thread.state.must_finish_before_compaction
    repeat = apply_work_fact(
        thread.slot, work_fact(WorkFact.AWAITING_CROSS_NODE_REPLY, False, seconds=5), at(5), CONFIG
    )
    assert not repeat.slot.state.must_finish_before_compaction  # a newer report of the same: nothing changes
    assert repeat.emits == []


def test_a_replayed_older_fact_event_does_not_undo_a_later_one() -> None:
    thread = Thread()
    thread.snap(70, 0)
    opened = work_fact(WorkFact.UNRECORDED_TEST_RESULTS, True, seconds=1)
    thread.feed(apply_work_fact(thread.slot, opened, at(1), CONFIG))
    thread.feed(
        apply_work_fact(thread.slot, work_fact(WorkFact.UNRECORDED_TEST_RESULTS, False, seconds=2), at(2), CONFIG)
    )
    replay = apply_work_fact(thread.slot, opened, at(3), CONFIG)
    assert replay.slot is None
    assert not thread.state.must_finish_before_compaction


def test_inputs_before_the_first_snapshot_are_kept() -> None:
    thread = Thread()
    thread.feed(apply_work_fact(None, work_fact(WorkFact.UNRECORDED_TEST_RESULTS), at(0), CONFIG))
    thread.feed(apply_handoff(thread.slot, package("draft"), at(0), CONFIG))
    assert thread.emitted == []
    thread.snap(50, 1)
    assert thread.state.must_finish_before_compaction
    assert thread.state.handoff.package_status.value == "draft"


def test_compaction_expected_within_the_horizon_with_must_finish_opens_risk() -> None:
    thread = Thread()
    emits = thread.snap(50, 0, must_finish=True, expected_in=CONFIG.risk_horizon.total_seconds() - 1)
    assert "thread.context.compaction_risk_opened" in describe(emits)
    far = thread.snap(50, 10, must_finish=True, expected_in=CONFIG.risk_horizon.total_seconds() * 3)
    assert "thread.context.compaction_risk_resolved" in describe(far)


def test_a_thread_becomes_stale_by_timer_and_recovers_on_the_next_report() -> None:
    thread = Thread()
    thread.snap(70, 0)
    deadline = thread.state.report_deadline_at
    assert tick(thread.slot, at(1), CONFIG).slot is None  # nothing due yet
    emits = thread.feed(tick(thread.slot, deadline, CONFIG))
    assert thread.state.stale
    assert [e.record.reason for e in emits] == ["stale"]
    assert tick(thread.slot, deadline, CONFIG).emits == []  # stale once, not on every tick
    thread.snap(69, 200)
    assert not thread.state.stale


def test_cadence_follows_the_level() -> None:
    thread = Thread()
    intervals = []
    for second, pct in enumerate((80, 50, 30, 10)):
        thread.snap(pct, second)
        intervals.append(thread.state.next_required_report_in_seconds)
    assert intervals == [30, 15, 5, 5]


def test_handoff_missing_opens_after_the_grace_when_critical_with_must_finish() -> None:
    thread = Thread()
    thread.snap(20, 0, must_finish=True)
    grace = CONFIG.handoff_missing_grace.total_seconds()
    assert "alert handoff_missing opened" not in describe(thread.feed(tick(thread.slot, at(grace - 1), CONFIG)))
    assert describe(thread.feed(tick(thread.slot, at(grace), CONFIG))) == ["alert handoff_missing opened"]
    emits = thread.feed(apply_handoff(thread.slot, package(seconds=grace + 5), at(grace + 5), CONFIG))
    assert "alert handoff_missing resolved" in describe(emits)


def test_compaction_start_without_preparation_opens_handoff_missing() -> None:
    thread = Thread()
    thread.snap(80, 0)  # safe: no wrap-up was ever asked for
    emits = thread.feed(apply_compaction_started(thread.slot, compaction_started(seconds=5), at(5), CONFIG))
    assert describe(emits) == ["alert handoff_missing opened"]


def test_a_wrap_up_request_alone_does_not_prepare_a_compaction() -> None:
    """Spec 9.5: requested is not done. Critical with must-finish work, wrap-up asked for, no package: missing."""
    thread = Thread()
    thread.snap(80, 0)
    thread.snap(20, 5, must_finish=True)  # critical: pre_compaction_wrap_up and prepare_handoff issued
    assert thread.state.wrap_up_requested
    emits = thread.feed(apply_compaction_started(thread.slot, compaction_started(seconds=6), at(6), CONFIG))
    assert describe(emits) == ["alert handoff_missing opened"]


def test_a_compacted_snapshot_before_the_compaction_event_opens_handoff_missing_too() -> None:
    thread = Thread()
    thread.snap(80, 0)
    thread.snap(20, 5, must_finish=True)
    emits = thread.snap(90, 8, compactions=1)  # the snapshot saying it compacted comes first
    assert "alert handoff_missing opened" in describe(emits)
    late = apply_compaction_started(thread.slot, compaction_started(seconds=7), at(9), CONFIG)
    assert late.emits == []  # the same compaction, already judged


def test_a_ready_package_prepares_the_compaction_whichever_arrives_first() -> None:
    for snapshot_first in (True, False):
        thread = Thread()
        thread.snap(20, 0, must_finish=True)
        thread.feed(apply_handoff(thread.slot, package(seconds=1), at(1), CONFIG))
        started = compaction_started(seconds=7)
        if snapshot_first:
            thread.snap(90, 8, compactions=1)
            thread.feed(apply_compaction_started(thread.slot, started, at(9), CONFIG))
        else:
            thread.feed(apply_compaction_started(thread.slot, started, at(7), CONFIG))
            thread.snap(90, 8, compactions=1)
        opened = [e for e in thread.emitted if e.topic == "alerts" and e.record.alert_type.value == "handoff_missing"]
        assert opened == [], snapshot_first


def test_a_package_of_the_previous_cycle_does_not_prepare_the_next_compaction() -> None:
    thread = Thread()
    thread.snap(20, 0, must_finish=True)
    thread.feed(apply_handoff(thread.slot, package(seconds=1), at(1), CONFIG))
    thread.snap(90, 8, compactions=1)
    thread.snap(20, 20, compactions=1, must_finish=True)
    emits = thread.feed(apply_compaction_started(thread.slot, compaction_started(seconds=30), at(30), CONFIG))
    assert describe(emits) == ["alert handoff_missing opened"]


def test_a_ready_package_with_a_summary_and_nothing_else_is_ready() -> None:
    """Spec 8.3 is best effort: a research thread has no tests, files or commands to list."""
    thread = Thread()
    thread.snap(30, 0)
    emits = thread.feed(apply_handoff(thread.slot, package("ready", complete=False), at(1), CONFIG))
    assert "thread.handoff.ready" in describe(emits)
    assert thread.state.handoff.package_status.value == "ready"
    assert thread.state.handoff_decision is None


def test_a_ready_package_without_a_summary_is_demoted_and_the_reason_kept() -> None:
    thread = Thread()
    thread.snap(30, 0)
    bare = package("ready", complete=False).model_copy(update={"summary_text": " "})
    emits = thread.feed(apply_handoff(thread.slot, bare, at(1), CONFIG))
    assert "thread.handoff.ready" not in describe(emits)
    assert thread.state.handoff.package_status.value == "draft"
    decision = thread.state.handoff_decision
    assert (decision.handoff_package_id, decision.kept_status.value) == ("hp-1", "draft")
    assert "summary_text" in decision.reason


def test_a_rejected_package_leaves_the_current_one_and_says_why() -> None:
    thread = Thread()
    thread.snap(30, 0)
    thread.feed(apply_handoff(thread.slot, package("ready", seconds=5), at(5), CONFIG))
    older = package("ready", package_id="hp-0", seconds=2)
    step = apply_handoff(thread.slot, older, at(6), CONFIG)
    thread.feed(step)
    assert step.emits == []
    assert thread.state.handoff.handoff_package_id == "hp-1"
    decision = thread.state.handoff_decision
    assert (decision.handoff_package_id, decision.kept_status) == ("hp-0", None)
    assert decision.reason.startswith("rejected")
    assert apply_handoff(thread.slot, older, at(7), CONFIG).slot is None  # the same verdict again changes nothing
    thread.feed(apply_handoff(thread.slot, package("consumed", seconds=8), at(8), CONFIG))
    assert thread.state.handoff_decision is None  # taken as claimed: the note is no longer current


def test_package_expires_by_timer() -> None:
    thread = Thread()
    thread.snap(30, 0)
    thread.feed(apply_handoff(thread.slot, package("draft"), at(0), CONFIG))
    ttl = CONFIG.handoff_ttl.total_seconds()
    thread.feed(tick(thread.slot, at(ttl), CONFIG))
    assert thread.state.handoff.package_status.value == "expired"


def test_ack_moves_an_open_alert_to_acked_once() -> None:
    thread = Thread()
    thread.snap(50, 0)
    alert_id = thread.state.open_alerts[0].alert_id
    emits = thread.feed(apply_ack(thread.slot, ack(alert_id), at(1)))
    assert [(e.record.alert_status, e.key) for e in emits] == [(AlertStatus.ACKED, alert_id)]
    assert apply_ack(thread.slot, ack(alert_id), at(2)).emits == []
    assert apply_ack(thread.slot, ack("no-such-alert"), at(2)).emits == []
    resolved = thread.snap(80, 10)
    assert "alert context_watch resolved" in describe(resolved)


def test_replaying_an_input_emits_nothing_new() -> None:
    thread = Thread()
    first = snapshot(50, seconds=0)
    thread.feed(apply_snapshot(None, first, DEFAULT_POLICY, at(0), CONFIG))
    replay = apply_snapshot(thread.slot, first, DEFAULT_POLICY, at(5), CONFIG)
    assert replay.slot is None
    assert replay.emits == []


def _open_alert_types(alerts: list[ContextAlert]) -> list[str]:
    return [a.alert_type.value for a in alerts if a.alert_status is not AlertStatus.RESOLVED]


inputs = st.lists(
    st.one_of(
        st.tuples(st.just("snap"), st.floats(min_value=0, max_value=100), st.booleans(), st.booleans()),
        st.tuples(st.just("fact"), st.sampled_from(WorkFact), st.booleans(), st.booleans()),
        st.tuples(st.just("handoff"), st.sampled_from(["draft", "ready", "consumed"]), st.booleans(), st.booleans()),
        st.tuples(st.just("ack"), st.integers(min_value=0, max_value=3), st.booleans(), st.booleans()),
        st.tuples(st.just("tick"), st.integers(min_value=1, max_value=400), st.booleans(), st.booleans()),
        st.tuples(st.just("compaction_started"), st.none(), st.booleans(), st.booleans()),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(script=inputs)
def test_invariants_hold_for_any_input_sequence(script: list) -> None:
    """Never two open alerts of one type; every transition is of a known alert; compactions are prepared (9.5)."""
    thread = Thread()
    seconds = 0.0
    compactions = 0
    for kind, value, flag, other in script:
        seconds += 7
        now = at(seconds)
        if kind == "snap":
            compacted = flag and other and thread.slot is not None
            compactions += compacted
            ready_before = thread.slot is not None and handoff.thread_ready(thread.state)
            missing_before = thread.slot is not None and any(
                e.record.alert_type.value == "handoff_missing" for e in thread.emitted if e.topic == "alerts"
            )
            emits = thread.snap(value, seconds, must_finish=flag, compactions=compactions)
            if compacted:  # spec 9.5: a package was ready for the cycle, or handoff_missing is open at the latest now
                opened_now = "alert handoff_missing opened" in describe(emits)
                assert ready_before or missing_before or opened_now
        elif thread.slot is None:
            continue
        elif kind == "fact":
            thread.feed(apply_work_fact(thread.slot, work_fact(value, flag, seconds=seconds), now, CONFIG))
        elif kind == "handoff":
            thread.feed(
                apply_handoff(thread.slot, package(value, seconds=seconds, package_id=f"hp-{other}"), now, CONFIG)
            )
        elif kind == "ack" and thread.state.open_alerts:
            target = thread.state.open_alerts[value % len(thread.state.open_alerts)].alert_id
            thread.feed(apply_ack(thread.slot, ack(target, seconds=seconds), now))
        elif kind == "tick":
            thread.feed(tick(thread.slot, at(seconds + value), CONFIG))
        elif kind == "compaction_started":
            thread.feed(apply_compaction_started(thread.slot, compaction_started(seconds=seconds), now, CONFIG))
        if thread.slot is not None and thread.state is not None:
            types = _open_alert_types(thread.state.open_alerts)
            assert len(types) == len(set(types))
            assert MasterAction.PREPARE_HANDOFF not in thread.state.due_actions or thread.state.wrap_up_requested


def test_the_checklist_follows_the_facts_and_the_package_without_a_level_change() -> None:
    thread = Thread()
    thread.snap(50, 0)  # watch: the wrap-up was asked for once, with the checklist of that moment
    thread.feed(apply_work_fact(thread.slot, work_fact(WorkFact.UNCOMMITTED_PATCH, seconds=1), at(1), CONFIG))
    assert thread.state.wrap_up_checklist.pending_patches == ["uncommitted_patch detail"]
    assert thread.state.wrap_up_checklist.files == ["src/line_b.py"]
    thread.feed(apply_work_fact(thread.slot, work_fact(WorkFact.UNCOMMITTED_PATCH, False, seconds=2), at(2), CONFIG))
    checklist = thread.state.wrap_up_checklist
    assert (checklist.pending_patches, checklist.completed_patches) == ([], ["uncommitted_patch detail"])
    thread.feed(apply_handoff(thread.slot, package("draft", seconds=3), at(3), CONFIG))
    assert thread.state.wrap_up_checklist.last_key_command.command == "make"
    assert thread.state.context_budget_level.value == "watch"
