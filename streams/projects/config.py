"""Tunables of the project and conversation folds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class ProjectsConfig:
    retire_after: timedelta = timedelta(minutes=30)
    """A thread whose state has not changed for this long leaves its project's view (a finished or abandoned
    thread). Far beyond staleness (3 x 30 s at most, spec 5.1), so a thread is stale long before it is retired."""
