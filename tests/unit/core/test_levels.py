from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.engine_config import EngineConfig
from core.levels import SEVERITY, classify_level, policy_for, report_interval_seconds
from schemas import DEFAULT_POLICY, ContextBudgetLevel, ThresholdPolicy

L = ContextBudgetLevel


@pytest.mark.parametrize(
    ("pct", "level"),
    [
        (100, L.SAFE),
        (60, L.SAFE),
        (59.9, L.WATCH),
        (40, L.WATCH),
        (39.9, L.URGENT),
        (25, L.URGENT),
        (24.9, L.CRITICAL),
        (0, L.CRITICAL),
    ],
)
def test_spec_section_4_boundaries(pct: float, level: ContextBudgetLevel) -> None:
    assert classify_level(pct) is level


@given(pct=st.floats(min_value=0, max_value=100, allow_nan=False))
def test_level_matches_the_band_definition(pct: float) -> None:
    expected = L.SAFE if pct >= 60 else L.WATCH if pct >= 40 else L.URGENT if pct >= 25 else L.CRITICAL
    assert classify_level(pct) is expected


@given(a=st.floats(min_value=0, max_value=100), b=st.floats(min_value=0, max_value=100))
def test_less_budget_is_never_a_healthier_level(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert SEVERITY[classify_level(low)] >= SEVERITY[classify_level(high)]


def test_project_policy_overrides_the_default_and_unknown_projects_get_it() -> None:
    strict = ThresholdPolicy(project_id="proj-hw", safe_min_pct=80, watch_min_pct=60, urgent_min_pct=45)
    policies = {"proj-hw": strict}
    assert classify_level(70, policy_for("proj-hw", policies.get)) is L.WATCH
    assert classify_level(70, policy_for("proj-other", policies.get)) is L.SAFE
    assert policy_for("proj-other", {}.get) is DEFAULT_POLICY
    fleet_default = ThresholdPolicy(project_id="*", safe_min_pct=70)
    assert policy_for("proj-other", {"*": fleet_default}.get) is fleet_default


def test_report_cadence_is_spec_5_1() -> None:
    config = EngineConfig()
    assert [report_interval_seconds(level, config) for level in L] == [30, 15, 5, 5]
