"""`master_context_strategy_summary` (spec 6.2): the project's budget situation in two sentences a person reads.

Built only from values that also decide when the view is republished (levels, ring percents, expected compaction to
the minute), so the text never changes without the view changing.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from schemas import ContextBudgetLevel
from schemas.projects import LiveThread
from streams.aggregates.ranking import TIE_BREAK_FACTS, healthiest
from streams.aggregates.resolution import expected_minute, ring_percent

LEVELS_MOST_SEVERE_FIRST = (
    ContextBudgetLevel.CRITICAL,
    ContextBudgetLevel.URGENT,
    ContextBudgetLevel.WATCH,
    ContextBudgetLevel.SAFE,
)


def strategy_summary(ranked: list[LiveThread], requiring_handoff: list[LiveThread]) -> str:
    if not ranked:
        return "No live threads."
    counts = Counter(t.summary.context_budget_level for t in ranked)
    levels = ", ".join(f"{counts[level]} {level.value}" for level in LEVELS_MOST_SEVERE_FIRST if counts[level])
    stale = sum(t.summary.stale for t in ranked)
    plural = "s" if len(ranked) > 1 else ""
    situation = f"{len(ranked)} live thread{plural}: {levels}" + (f" ({stale} stale)" if stale else "")
    if requiring_handoff:
        first = requiring_handoff[0]
        situation += f"; hand off {first.summary.thread_id} first ({_why(first)})"
    spare = healthiest(ranked)
    subtasks = (
        f"Give new subtasks to {spare.summary.thread_id} "
        f"({ring_percent(spare.summary.context_budget_remaining_pct)}% left)."
        if spare
        else "No thread is safe for new subtasks: start a new thread."
    )
    return f"{situation}. {subtasks}"


def _why(thread: LiveThread) -> str:
    summary = thread.summary
    reasons = [f"{summary.context_budget_level.value}, {ring_percent(summary.context_budget_remaining_pct)}% left"]
    if summary.must_finish_before_compaction:
        held = [fact.value.replace("_", " ") for fact in TIE_BREAK_FACTS if fact in thread.active_facts]
        reasons.append("must finish before compaction" + (f": {', '.join(held)}" if held else ""))
    expected = expected_minute(summary.compaction_expected_at)
    if expected is not None:
        reasons.append(f"compaction expected by {datetime.fromtimestamp(expected * 60, UTC):%H:%M} UTC")
    if summary.stale:
        reasons.append("stale")
    return "; ".join(reasons)
