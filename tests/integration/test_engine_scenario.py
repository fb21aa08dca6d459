"""The engine on the real broker: a scripted project of three threads, with exact outputs per thread."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from core.settings import Settings
from schemas import WorkFact
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, produce
from tests.unit.engine.builders import package, snapshot, work_fact

pytestmark = pytest.mark.kafka

# Deterministic timing: nothing goes stale during the test, and handoff_missing opens as soon as it is due. The
# scripted times are in the past: a package's TTL would otherwise run out at the first timer pass, racing the script.
ENGINE_ENV = {
    "CTXBUDGET_STALE_FACTOR": "1000",
    "CTXBUDGET_HANDOFF_MISSING_GRACE_SECONDS": "0",
    "CTXBUDGET_HANDOFF_TTL_SECONDS": "1e9",
}


@pytest.fixture
def engine_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})


def _context_kinds(outputs: Outputs, thread: str) -> list[str]:
    return [r["event_type"].removeprefix("thread.context.") for r in outputs.of_thread("context-events", thread)]


def _alerts(outputs: Outputs, thread: str) -> list[str]:
    """Each alert of the thread in the order it was opened, with its transitions (ordered per alert_id key)."""
    lives: dict[str, list[str]] = {}
    for record in outputs.of_thread("alerts", thread):
        lives.setdefault(record["alert_id"], [record["alert_type"]]).append(record["alert_status"])
    ordered = sorted(lives.items(), key=lambda item: int(item[0].rsplit(":", 1)[1]))
    return [":".join(life) for _, life in ordered]


def _actions(outputs: Outputs, thread: str) -> list[str]:
    """Every state each action of the thread reached, in publishing order (one record per action and state)."""
    return [f"{r['actions'][0]}:{r['state']}" for r in outputs.of_thread("master-actions", thread)]


async def _step(outputs: Outputs, settings: Settings, records: list, thread: str, snapshot_id: str) -> None:
    """Send, then wait until the engine has published the thread's state for this snapshot."""
    await produce(settings, records)
    await outputs.wait_for(
        lambda o: o.latest_states().get(thread, {}).get("snapshot_id") == snapshot_id, what=f"{thread} at {snapshot_id}"
    )


async def test_three_threads_walk_the_levels_hand_off_and_compact(engine_settings: Settings, tmp_path: Path) -> None:
    settings = engine_settings
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker", **ENGINE_ENV).start()
    try:
        async with Outputs(settings) as outputs:
            # A: safe -> watch -> urgent -> critical (must finish) -> ready handoff -> compaction -> safe
            walk = [(80, 0, {}), (55, 10, {}), (35, 20, {}), (20, 30, {"must_finish": True})]
            for pct, seconds, extra in walk:
                s = snapshot(pct, thread="a", version=seconds + 1, seconds=seconds, **extra)
                await _step(outputs, settings, [("snapshots", "a", s)], "a", s.snapshot_id)
            await produce(settings, [("handoff-packages", "a", package(thread="a", seconds=35))])
            await outputs.wait_for(
                lambda o: any(r["event_type"] == "thread.handoff.ready" for r in o.records["client-events"]),
                what="handoff ready",
            )
            s = snapshot(85, thread="a", version=100, seconds=50, compactions=1)
            await _step(outputs, settings, [("snapshots", "a", s)], "a", s.snapshot_id)

            # B: critical with an uncommitted patch and no package -> handoff_missing; then compaction -> safe. The
            # wrap-up was requested, but no package was ready: handoff_missing holds through the compaction (spec
            # 9.5) until a later report shows the thread going on safely.
            await produce(settings, [("session-events", "b", work_fact(WorkFact.UNCOMMITTED_PATCH, thread="b"))])
            for pct, seconds, compactions in [(45, 0, 0), (15, 10, 0), (90, 20, 1), (88, 30, 1)]:
                s = snapshot(pct, thread="b", version=seconds + 1, seconds=seconds, compactions=compactions)
                await _step(outputs, settings, [("snapshots", "b", s)], "b", s.snapshot_id)

            # C: safe straight into a compaction, with nothing prepared (spec 9.5: handoff_missing opens, and is
            # resolved once a later report shows the thread going on safely)
            for pct, seconds, compactions in [(75, 0, 0), (88, 10, 1), (86, 20, 1)]:
                s = snapshot(pct, thread="c", version=seconds + 1, seconds=seconds, compactions=compactions)
                await _step(outputs, settings, [("snapshots", "c", s)], "c", s.snapshot_id)

            assert _context_kinds(outputs, "a") == [
                "updated",
                "updated", "level_changed",
                "updated", "level_changed",
                "updated", "level_changed", "compaction_risk_opened",
                "compaction_risk_resolved",
                "updated", "level_changed",
            ]  # fmt: skip
            assert _alerts(outputs, "a") == [
                "context_watch:opened:resolved",
                "context_urgent:opened:resolved",
                "context_critical:opened:resolved",
                "compaction_risk:opened:resolved",  # resolved by the ready handoff
                "handoff_missing:opened:resolved",  # critical with must-finish and no package (grace 0)
            ]
            assert _actions(outputs, "a") == [
                "refresh_stage_summary:issued",
                "refresh_stage_summary:superseded", "prepare_handoff:issued", "avoid_large_context_append:issued",
                "finish_atomic_subtask:issued", "precreate_relay_thread:issued",
                "avoid_large_context_append:superseded", "finish_atomic_subtask:superseded",
                "pre_compaction_wrap_up:issued", "forbid_context_growth:issued",
                "prepare_handoff:done",  # the ready package
                "pre_compaction_wrap_up:superseded", "forbid_context_growth:superseded",
                "precreate_relay_thread:superseded",  # the compaction ends the cycle
                "refresh_stage_summary:issued",
            ]  # fmt: skip
            assert _alerts(outputs, "b") == [
                "context_watch:opened:resolved",
                "context_critical:opened:resolved",
                "compaction_risk:opened:resolved",
                "handoff_missing:opened:resolved",
            ]
            wrap_up = next(
                r
                for r in outputs.of_thread("master-actions", "b")
                if r["actions"] == ["pre_compaction_wrap_up"] and r["state"] == "issued"
            )
            assert wrap_up["checklist"]["files"] == ["src/line_b.py"]
            assert wrap_up["checklist"]["pending_patches"] == ["uncommitted_patch detail"]
            assert _alerts(outputs, "c") == ["handoff_missing:opened:resolved"]
            # a compaction starts a new cycle, so the safe-level action is issued again for it
            assert _actions(outputs, "c") == [
                "refresh_stage_summary:issued",
                "refresh_stage_summary:superseded",
                "refresh_stage_summary:issued",
            ]

            client = [
                (r["event_type"], r["thread_id"])
                for r in outputs.records["client-events"]
                if r["event_type"].startswith("thread.handoff.")  # the engine's; project views publish their own
            ]
            issued = [r["action_id"] for r in outputs.records["client-events"] if r["event_type"].endswith("issued")]
            assert sorted(issued) == sorted(
                r["action_id"]
                for thread in "abc"
                for r in outputs.of_thread("master-actions", thread)
                if r["state"] == "issued"
            )
            assert sorted(client) == sorted(
                [("thread.handoff.required", "a"), ("thread.handoff.ready", "a"), ("thread.handoff.required", "b")]
            )
            states = outputs.latest_states()
            assert {t: (s["context_budget_level"], s["compaction_count"]) for t, s in states.items()} == {
                "a": ("safe", 1), "b": ("safe", 1), "c": ("safe", 1),
            }  # fmt: skip
            assert states["b"]["must_finish_before_compaction"] is True  # the patch is still uncommitted
            event_ids = [r["event_id"] for r in outputs.records["context-events"]]
            assert len(event_ids) == len(set(event_ids))
    finally:
        assert worker.stop() == 0, worker.output()
