"""The resolution readers see a thread's values at: the ring's integer percent, expected compaction to the minute.

It is also the resolution that decides what moves: a project view is republished, a thread state forwarded to its
project, and threads reordered only when a value changes at this resolution. A percent drifting inside one integer,
or a forecast moving by seconds, is not news to anyone.
"""

from __future__ import annotations

import math
from datetime import datetime

from schemas.views import ThreadContextSummary


def ring_percent(pct: float) -> int:
    """The integer percent shown for a remaining budget: floored, so the marker never shows more room than there is
    and never crosses a band edge (59.9 is watch and shows 59, never the safe-looking 60)."""
    return math.floor(pct)


def expected_minute(at: datetime | None) -> int | None:
    """Expected compaction to the minute (since the epoch)."""
    return int(at.timestamp() // 60) if at is not None else None


def seen_values(summary: ThreadContextSummary) -> tuple[object, ...]:
    """What a reader of a project view sees of one thread."""
    return (
        summary.thread_id,
        summary.node_id,
        summary.task_id,
        ring_percent(summary.context_budget_remaining_pct),
        summary.context_budget_level,
        summary.must_finish_before_compaction,
        expected_minute(summary.compaction_expected_at),
        summary.stale,
        summary.task_importance,
    )
