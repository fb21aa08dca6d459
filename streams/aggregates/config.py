"""Tunables of the project and conversation folds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

REFRESHES_PER_RETIREMENT = 6


@dataclass(frozen=True)
class ProjectsConfig:
    retire_after: timedelta = timedelta(minutes=30)
    """A thread that has not reported for this long leaves its project's view (a finished or abandoned thread).
    Far beyond staleness (3 x 30 s at most, spec 5.1), so a thread is stale long before it is retired."""

    @property
    def refresh_after(self) -> timedelta:
        """A reporting thread whose project values hold still is forwarded to its project again after this long, so
        it is retired only between `retire_after - refresh_after` and `retire_after` after its last report."""
        return self.retire_after / REFRESHES_PER_RETIREMENT
