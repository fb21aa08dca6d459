"""The engine's tunables, with the spec's numbers as defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from schemas import ContextBudgetLevel

# Spec 5.1: report every 30 s normally, every 15 s in watch, every 5 s in urgent and critical.
REPORT_INTERVAL_SECONDS: Mapping[ContextBudgetLevel, int] = MappingProxyType(
    {
        ContextBudgetLevel.SAFE: 30,
        ContextBudgetLevel.WATCH: 15,
        ContextBudgetLevel.URGENT: 5,
        ContextBudgetLevel.CRITICAL: 5,
    }
)


@dataclass(frozen=True)
class EngineConfig:
    report_interval_seconds: Mapping[ContextBudgetLevel, int] = field(default_factory=lambda: REPORT_INTERVAL_SECONDS)
    stale_factor: float = 3.0
    """A thread is stale when no report came within `stale_factor` x its required interval."""
    risk_horizon: timedelta = timedelta(minutes=5)
    """Compaction expected within this horizon while must-finish work is held opens compaction risk."""
    handoff_missing_grace: timedelta = timedelta(seconds=60)
    """Critical with must-finish work and no ready package for this long opens handoff_missing."""
    handoff_ttl: timedelta = timedelta(hours=2)
    """A draft or ready package not consumed within this time since creation expires."""
