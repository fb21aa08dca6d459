"""The master's relay schedule (core/relay_schedule.py, issue 37): caps per node and per project with the rest queued
in the order given, futile relays refused with why, new subtasks on the healthiest safe thread or a fresh one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.relay_schedule import (
    RelayHistory,
    RelayLimits,
    RelayLoad,
    RelaySlot,
    futile_reason,
    place_subtask,
    schedule_relays,
)
from schemas import ContextBudgetLevel
from schemas.views import ThreadContextSummary

NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
LIMITS = RelayLimits(per_node=2, per_project=3, repeat_seconds=600)


def slot(thread_id: str, node: str = "node-1", project: str = "p-1") -> RelaySlot:
    return RelaySlot(project, thread_id, node)


def verdicts(decisions) -> list[tuple[str, str, int | None]]:
    return [(d.slot.thread_id, d.verdict.value, d.queue_position) for d in decisions]


def test_a_node_at_its_cap_queues_the_rest_in_the_order_given_and_other_nodes_still_start() -> None:
    wanting = [slot("t-1"), slot("t-2"), slot("t-3"), slot("t-4", "node-2"), slot("t-5")]
    decisions = schedule_relays(wanting, RelayLoad.of([]), LIMITS)
    assert verdicts(decisions) == [
        ("t-1", "start", None),
        ("t-2", "start", None),
        ("t-3", "queued", 1),
        ("t-4", "start", None),
        ("t-5", "queued", 2),
    ]
    assert decisions[2].reason == "node node-1 already runs 2 relays (cap 2)"


def test_relays_already_running_count_against_the_caps() -> None:
    running = [slot("r-1", "node-9"), slot("r-2", "node-8"), slot("r-3", "node-1", project="p-2")]
    decisions = schedule_relays([slot("t-1", "node-2"), slot("t-2")], RelayLoad.of(running), LIMITS)
    assert verdicts(decisions) == [("t-1", "start", None), ("t-2", "queued", 1)]
    assert decisions[1].reason == "project p-1 already runs 3 relays (cap 3)"


def test_a_futile_relay_is_refused_with_its_reason_and_takes_no_place() -> None:
    decisions = schedule_relays([slot("t-1"), slot("t-2"), slot("t-3")], RelayLoad.of([]), LIMITS, {"t-1": "why"})
    assert verdicts(decisions) == [("t-1", "futile", None), ("t-2", "start", None), ("t-3", "start", None)]
    assert decisions[0].reason == "why"


def test_merged_loads_take_the_larger_count_of_each() -> None:
    a = RelayLoad({"n-1": 2, "n-2": 0}, {"p-1": 1})
    b = RelayLoad({"n-2": 1}, {"p-1": 3, "p-2": 1})
    assert RelayLoad.merged(a, b) == RelayLoad({"n-1": 2, "n-2": 1}, {"p-1": 3, "p-2": 1})


def test_a_relay_thread_whose_first_report_was_already_below_the_watch_threshold_is_futile() -> None:
    reason = futile_reason(RelayHistory(first_remaining_pct=52), 60, NOW, 600)
    assert reason is not None
    assert reason.startswith("its relay started at 52% left, already below the watch threshold (60%)")
    assert futile_reason(RelayHistory(first_remaining_pct=60), 60, NOW, 600) is None  # 60 is still safe


def test_the_same_work_relayed_again_within_the_repeat_window_is_futile_and_after_it_is_not() -> None:
    recent = RelayHistory(relayed_at=NOW - timedelta(seconds=90))
    reason = futile_reason(recent, 60, NOW, 600)
    assert reason is not None
    assert reason.startswith("the same work was relayed 90 s ago (less than 600 s)")
    assert futile_reason(RelayHistory(relayed_at=NOW - timedelta(seconds=600)), 60, NOW, 600) is None
    almost = futile_reason(RelayHistory(relayed_at=NOW - timedelta(seconds=59.6)), 60, NOW, 60)
    assert almost is not None
    assert almost.startswith("the same work was relayed 59 s ago (less than 60 s)")
    assert futile_reason(RelayHistory(), 60, NOW, 600) is None


def summary(thread_id: str, level: str, pct: float, **extra) -> ThreadContextSummary:
    return ThreadContextSummary(
        thread_id=thread_id,
        node_id="node-1",
        context_budget_remaining_pct=pct,
        context_budget_level=ContextBudgetLevel(level),
        must_finish_before_compaction=extra.get("must_finish", False),
        stale=extra.get("stale", False),
        updated_at=NOW,
    )


def test_a_new_subtask_goes_to_the_free_safe_thread_with_the_most_room() -> None:
    threads = [
        summary("t-watch", "watch", 55),
        summary("t-safe", "safe", 70),
        summary("t-roomy-but-relaying", "safe", 95),
        summary("t-stale", "safe", 99, stale=True),
        summary("t-roomiest", "safe", 82),
    ]
    placement = place_subtask(threads, relaying=["t-roomy-but-relaying"])
    assert placement.thread_id == "t-roomiest"
    assert placement.reason == "safe with 82% left, the most room of 2 free safe threads"


def test_without_a_free_safe_thread_a_new_subtask_starts_a_fresh_one_and_says_why() -> None:
    threads = [summary("t-1", "watch", 55), summary("t-2", "urgent", 30), summary("t-3", "safe", 90)]
    placement = place_subtask(threads, relaying=["t-3"])
    assert placement.thread_id is None
    assert placement.reason == "no free safe thread (1 urgent, 1 watch; 1 relaying): start a fresh thread"
