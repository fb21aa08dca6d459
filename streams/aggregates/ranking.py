"""The master's priority order of a project's threads (spec 8.1, 8.2): a total order, most pressing first.

Level severity (critical first); must-finish work; then, as spec 8.2.2 orders them, an uncommitted patch, unrecorded
test results, a hardware step in progress; earlier expected compaction (unknown last); higher task importance
(unknown last); thread id last, so equal threads still have one order whatever order they arrived in.

Percent and expected compaction count at the resolution a reader sees them (`streams.aggregates.resolution`): a
forecast seconds earlier than another is a tie, not a reason to reorder the view or to forward a thread's every
snapshot to its project.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.levels import SEVERITY
from core.relay_schedule import takes_new_work
from schemas import ContextBudgetLevel, WorkFact
from schemas.projects import LiveThread
from streams.aggregates.resolution import expected_minute, ring_percent

TIE_BREAK_FACTS = (
    WorkFact.UNCOMMITTED_PATCH,
    WorkFact.UNRECORDED_TEST_RESULTS,
    WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP,
)
"""Spec 8.2.2, in its order: among equally severe threads, those holding these come first."""
AT_RISK_LEVELS = frozenset({ContextBudgetLevel.URGENT, ContextBudgetLevel.CRITICAL})
"""Levels whose threads can be the project's `next_compaction_risk_thread_id` (spec 6.2)."""


def rank_key(thread: LiveThread) -> tuple[int, bool, bool, bool, bool, bool, int, bool, int, str]:
    """Smaller sorts first. Booleans are `not holds_x`, so the thread that holds x sorts before one that does not."""
    summary = thread.summary
    expected = expected_minute(summary.compaction_expected_at)
    importance = thread.task_importance
    patch, tests, hardware = (fact not in thread.active_facts for fact in TIE_BREAK_FACTS)
    return (
        -SEVERITY[summary.context_budget_level],
        not summary.must_finish_before_compaction,
        patch,
        tests,
        hardware,
        expected is None,
        expected or 0,
        importance is None,
        -(importance or 0),
        summary.thread_id,
    )


def precedes(a: LiveThread, b: LiveThread) -> bool:
    """True when `a` is more pressing than `b`."""
    return rank_key(a) < rank_key(b)


def rank(threads: Iterable[LiveThread]) -> list[LiveThread]:
    return sorted(threads, key=rank_key)


def next_compaction_risk(ranked: list[LiveThread]) -> LiveThread | None:
    """The first of the order among urgent and critical threads (spec 6.2 `next_compaction_risk_thread_id`)."""
    return next((t for t in ranked if t.summary.context_budget_level in AT_RISK_LEVELS), None)


def healthiest(threads: Iterable[LiveThread]) -> LiveThread | None:
    """Where new subtasks should go (spec 8.2.4): the fresh, safe thread with the most room and no work to save.

    Watch and urgent threads should not take long new context (spec 8.2.3), so only safe ones qualify; None means
    the master should start a new thread.
    """
    candidates = [t for t in threads if takes_new_work(t.summary)]
    return min(
        candidates,
        key=lambda t: (-ring_percent(t.summary.context_budget_remaining_pct), t.summary.thread_id),
        default=None,
    )
