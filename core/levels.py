"""Level classification (spec 4) and report cadence (spec 5.1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, DEFAULT_POLICY_PROJECT_ID, ContextBudgetLevel, ThresholdPolicy

SEVERITY: Mapping[ContextBudgetLevel, int] = {
    ContextBudgetLevel.SAFE: 0,
    ContextBudgetLevel.WATCH: 1,
    ContextBudgetLevel.URGENT: 2,
    ContextBudgetLevel.CRITICAL: 3,
}


def classify_level(pct: float, policy: ThresholdPolicy = DEFAULT_POLICY) -> ContextBudgetLevel:
    """The level of a remaining percent. Band starts belong to the healthier band: 60 is safe, 59.9 is watch."""
    if pct >= policy.safe_min_pct:
        return ContextBudgetLevel.SAFE
    if pct >= policy.watch_min_pct:
        return ContextBudgetLevel.WATCH
    if pct >= policy.urgent_min_pct:
        return ContextBudgetLevel.URGENT
    return ContextBudgetLevel.CRITICAL


def policy_for(project_id: str, lookup: Callable[[str], ThresholdPolicy | None]) -> ThresholdPolicy:
    """The project's own policy, else the `*` default, else spec 4's defaults (`lookup` is e.g. `dict.get`)."""
    return lookup(project_id) or lookup(DEFAULT_POLICY_PROJECT_ID) or DEFAULT_POLICY


def report_interval_seconds(level: ContextBudgetLevel, config: EngineConfig) -> int:
    return config.report_interval_seconds[level]
