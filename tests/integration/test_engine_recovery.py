"""Crashes, restarts and rebalances lose nothing: the pipeline ends where a pure replay of the same input ends.

The reference is the engine's own pure batch function run over the same records in one process; the real worker
is SIGKILLed mid-stream, restarted, joined by a second worker that later leaves, and must converge to the same
per-thread results, with every accepted snapshot reflected by exactly one distinct event id.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.engine_config import EngineConfig
from core.settings import Settings
from streams.engine.batch import InputMessage, process_batch
from streams.engine.fold import ThreadSlot
from streams.simulator import SimRecord, SimulationConfig, generate
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, committed_offsets, committed_records, produce

pytestmark = pytest.mark.kafka

# Simulated time is in the past: keep wall-clock timers (staleness, package TTL) out of the comparison. A rebalance
# stuck for 30 s is reported in the worker's log well before the 120 s a convergence may take.
ENGINE_ENV = {
    "CTXBUDGET_STALE_FACTOR": "100000",
    "CTXBUDGET_HANDOFF_TTL_SECONDS": "1e9",
    "CTXBUDGET_BATCH_SIZE": "200",
    "CTXBUDGET_STUCK_REBALANCE_SECONDS": "30",
}


@dataclass(frozen=True)
class Expected:
    states: dict[str, tuple]
    snapshot_events: set[str]


def _fingerprint(state: dict) -> tuple:
    handoff = state.get("handoff") or {}
    return (
        state["snapshot_id"],
        state["context_budget_level"],
        state["compaction_count"],
        state["must_finish_before_compaction"],
        handoff.get("handoff_package_id"),
        handoff.get("package_status"),
    )


def reference(records: list[SimRecord]) -> Expected:
    """The pure engine over the same records, in their per-topic order."""
    slots: dict[str, ThreadSlot] = {}
    messages = [InputMessage(r.topic, 0, i, r.key, r.value) for i, r in enumerate(records)]
    result = process_batch(
        messages,
        slots.get,
        {}.get,
        datetime.now(UTC),
        EngineConfig(stale_factor=100000, handoff_ttl=timedelta(seconds=1e9)),
        "",
    )
    states = {t: _fingerprint(s.state.model_dump(mode="json")) for t, s in result.states.items() if s.state}
    events = {
        e.record.event_id
        for e in result.emits
        if e.topic == "context-events" and e.record.reason in ("snapshot", "compaction")
    }
    return Expected(states, events)


def _snapshot_events(outputs: Outputs) -> list[str]:
    return [r["event_id"] for r in outputs.records["context-events"] if r["reason"] in ("snapshot", "compaction")]


def _differences(outputs: Outputs, expected: Expected) -> list[str]:
    states = {t: _fingerprint(s) for t, s in outputs.latest_states().items()}
    wrong = [f"{t}: expected {v}, got {states.get(t)}" for t, v in expected.states.items() if states.get(t) != v]
    missing = sorted(expected.snapshot_events - set(_snapshot_events(outputs)))
    return wrong + [f"missing event {event}" for event in missing]


def _converged(outputs: Outputs, expected: Expected) -> bool:
    return not _differences(outputs, expected)


async def _wait_converged(outputs: Outputs, expected: Expected, *workers: WorkerProcess) -> None:
    try:
        await outputs.wait_for(lambda o: _converged(o, expected), within=120, what="convergence")
    except AssertionError as error:
        differences = _differences(outputs, expected)
        described = [await asyncio.to_thread(worker.describe) for worker in workers]
        raise AssertionError("\n".join([str(error), *differences[:10], *described])) from None


async def _produce_paced(settings: Settings, records: list[SimRecord], chunk: int, pause: float) -> None:
    for start in range(0, len(records), chunk):
        await produce(settings, [(r.topic, r.key, r.value) for r in records[start : start + chunk]])
        await asyncio.sleep(pause)


@pytest.fixture
def engine_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})


# Both moments matter. Killed early (mostly before its first commit), the restarted worker reads partitions from the
# start, and that is where Faust once dropped fetched records of whole partitions that no later record revealed.
# Killed after commits, it resumes mid-partition with state already in the changelogs.
@pytest.mark.parametrize("committed_before_kill", [0, 200], ids=["early", "after-commits"])
async def test_sigkill_mid_stream_then_restart_loses_and_duplicates_nothing(
    engine_settings: Settings, tmp_path: Path, committed_before_kill: int
) -> None:
    settings = engine_settings
    records = list(generate(SimulationConfig(threads=60, turns_per_thread=40, seed=11)))
    expected = reference(records)
    await ensure_topics(settings)
    async with Outputs(settings) as outputs:
        first = WorkerProcess(settings, tmp_path / "w1", **ENGINE_ENV).start()
        producing = asyncio.create_task(_produce_paced(settings, records, chunk=100, pause=0.2))
        await outputs.wait_for(lambda o: len(o.records["thread-state"]) >= 30, within=90, what="first outputs")
        deadline = time.monotonic() + 60
        while committed_records(await committed_offsets(settings), settings.topic("snapshots")) < committed_before_kill:
            assert time.monotonic() < deadline, first.output()
            await asyncio.sleep(0.1)
        first.kill()
        await producing
        assert not _converged(outputs, expected), "the kill came too late to test recovery"

        second = WorkerProcess(settings, tmp_path / "w2", **ENGINE_ENV).start()
        try:
            await _wait_converged(outputs, expected, second)
        finally:
            assert second.stop() == 0, second.output()
    # Nothing lost; a replay after the kill may repeat an output, always under the same id (consumers drop it).
    assert set(_snapshot_events(outputs)) == expected.snapshot_events


async def test_a_second_worker_joins_and_leaves_and_results_stay_correct(
    engine_settings: Settings, tmp_path: Path
) -> None:
    settings = engine_settings.model_copy(update={"topic_partitions": 4})
    records = list(generate(SimulationConfig(threads=40, turns_per_thread=30, seed=5)))
    expected = reference(records)
    third = len(records) // 3
    await ensure_topics(settings)
    async with Outputs(settings) as outputs:
        one = WorkerProcess(settings, tmp_path / "w1", **ENGINE_ENV).start()
        two = WorkerProcess(settings, tmp_path / "w2", **ENGINE_ENV)
        try:
            await _produce_paced(settings, records[:third], chunk=100, pause=0.02)
            two.start()
            # Its first progress line: it runs (a Ctrl-C before the worker's loop starts is no clean leave) and
            # has had its first progress interval to join the group.
            await two.printed("records in ")
            await _produce_paced(settings, records[third : 2 * third], chunk=100, pause=0.02)
            assert two.stop() == 0, two.output()  # leaves: its partitions move back to the first worker
            await _produce_paced(settings, records[2 * third :], chunk=100, pause=0.02)
            await _wait_converged(outputs, expected, one, two)
        finally:
            assert one.stop() == 0, one.output()
            two.stop()
