"""The projection fold's tunables."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.projection import MAX_COMPACTION_HISTORY, MAX_RECENT_EVENT_IDS, MAX_SURFACE_ENTRIES
from streams.projection.forecast import ForecastConfig


@dataclass(frozen=True)
class ProjectionConfig:
    reading_step_pct: float = 2.0
    """Emit a reading when the budget moved at least this many percentage points since the last one."""
    dedupe_window: int = 128
    """Event ids remembered per thread: a replay within this many events changes nothing."""
    max_surface_entries: int = 256
    """Surface entries kept per thread; beyond, the oldest merge into one (compactions replace from the start)."""
    compaction_history: int = 8
    forecast: ForecastConfig = field(default_factory=ForecastConfig)

    def __post_init__(self) -> None:
        if self.reading_step_pct <= 0:
            raise ValueError("reading_step_pct must be positive")
        if not 1 <= self.dedupe_window <= MAX_RECENT_EVENT_IDS:
            raise ValueError(f"dedupe_window must be within [1, {MAX_RECENT_EVENT_IDS}]")
        if not 2 <= self.max_surface_entries <= MAX_SURFACE_ENTRIES:
            raise ValueError(f"max_surface_entries must be within [2, {MAX_SURFACE_ENTRIES}]")
        if not 1 <= self.compaction_history <= MAX_COMPACTION_HISTORY:
            raise ValueError(f"compaction_history must be within [1, {MAX_COMPACTION_HISTORY}]")
