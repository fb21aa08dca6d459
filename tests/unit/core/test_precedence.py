from __future__ import annotations

from datetime import timedelta

from core.engine_config import EngineConfig
from core.levels import DEFAULT_POLICY
from core.precedence import Verdict
from schemas import SourceKind
from streams.engine.fold import apply_snapshot, tick
from tests.unit.engine.builders import at, snapshot

CONFIG = EngineConfig()


def _accept(*snapshots, now_s: float = 0):
    slot = None
    verdicts = []
    for s in snapshots:
        step = apply_snapshot(slot, s, DEFAULT_POLICY, at(now_s), CONFIG)
        verdicts.append(step.verdict)
        slot = step.slot or slot
    return slot, verdicts


def test_a_repeated_snapshot_changes_nothing() -> None:
    first = snapshot(70, version=5)
    _slot, verdicts = _accept(first, first)
    assert verdicts == [Verdict.ACCEPT, Verdict.NOT_NEWER]


def test_an_older_version_changes_nothing_even_if_it_arrives_last() -> None:
    slot, verdicts = _accept(snapshot(50, version=6, seconds=10), snapshot(70, version=5, seconds=0))
    assert verdicts == [Verdict.ACCEPT, Verdict.NOT_NEWER]
    assert slot.state.context_budget_remaining_pct == 50


def test_same_version_later_capture_is_newer() -> None:
    _, verdicts = _accept(snapshot(70, version=5, seconds=0), snapshot(65, version=5, seconds=1))
    assert verdicts == [Verdict.ACCEPT, Verdict.ACCEPT]


def test_lower_source_is_shadowed_while_the_higher_one_is_fresh() -> None:
    app = snapshot(70, source=SourceKind.CODEX_APP_SERVER, version=1)
    estimate = snapshot(30, source=SourceKind.WORKER_ESTIMATOR, version=1, seconds=1)
    slot, verdicts = _accept(app, estimate)
    assert verdicts == [Verdict.ACCEPT, Verdict.SHADOWED]
    assert slot.state.source_kind is SourceKind.CODEX_APP_SERVER


def test_lower_source_replaces_a_stale_higher_one() -> None:
    slot, _ = _accept(snapshot(70, source=SourceKind.CODEX_SDK, version=1))
    deadline = slot.state.report_deadline_at
    assert deadline == at(0) + timedelta(seconds=30 * CONFIG.stale_factor)
    slot = tick(slot, deadline, CONFIG).slot
    assert slot.state.stale
    step = apply_snapshot(
        slot, snapshot(45, source=SourceKind.WORKER_ESTIMATOR, version=1, seconds=100), DEFAULT_POLICY, deadline, CONFIG
    )
    assert step.verdict is Verdict.ACCEPT
    assert step.slot.state.source_kind is SourceKind.WORKER_ESTIMATOR
    assert not step.slot.state.stale


def test_higher_source_always_takes_over() -> None:
    slot, verdicts = _accept(
        snapshot(40, source=SourceKind.WORKER_ESTIMATOR, version=9),
        snapshot(55, source=SourceKind.CODEX_APP_SERVER, version=1, seconds=1),
    )
    assert verdicts == [Verdict.ACCEPT, Verdict.ACCEPT]
    assert slot.state.source_kind is SourceKind.CODEX_APP_SERVER
