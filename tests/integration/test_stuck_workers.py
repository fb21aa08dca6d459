"""Stuck workers get out or say so. One whose stop hangs still exits: after `shutdown_seconds`, or at once on a second
Ctrl-C, with the stacks that show what it was waiting for. One whose rebalance stops advancing fails /healthz and
logs what the rebalance waits for."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from core.settings import Settings
from tests.integration.pipeline import WorkerProcess, get_status

pytestmark = pytest.mark.kafka


def _stuck(settings: Settings, tmp_path: Path, shutdown_seconds: float, where: str = "stop") -> WorkerProcess:
    """`tests.integration.stuck_worker`, stuck in its stop (prints `started`, then `stopping` once its stop begins,
    which never ends) or in its table recovery."""
    return WorkerProcess(
        settings.model_copy(update={"app_id": f"stuck-{tmp_path.name}"}),
        tmp_path / "worker",
        module=f"tests.integration.stuck_worker {where}",
        CTXBUDGET_SHUTDOWN_SECONDS=str(shutdown_seconds),
        CTXBUDGET_STUCK_REBALANCE_SECONDS="3",
    ).start()


async def test_a_stop_that_hangs_ends_after_shutdown_seconds_with_the_stacks(
    settings: Settings, tmp_path: Path
) -> None:
    worker = _stuck(settings, tmp_path, shutdown_seconds=2)
    await worker.printed("started")
    signalled = time.monotonic()
    code = worker.stop()
    output = worker.output()
    assert code == 1, output
    assert time.monotonic() - signalled >= 2, output
    assert "shutdown abandoned: still stopping 2 s after SIGINT" in output, output
    assert "in never_stops" in output, output  # the stuck task's stack names what it awaited


async def test_a_second_ctrl_c_ends_a_hanging_stop_at_once(settings: Settings, tmp_path: Path) -> None:
    worker = _stuck(settings, tmp_path, shutdown_seconds=600)
    await worker.printed("started")
    assert worker.process is not None
    worker.process.send_signal(signal.SIGINT)
    await worker.printed("stopping")
    code = worker.stop()  # the second Ctrl-C
    output = worker.output()
    assert code == 1, output
    assert "shutdown abandoned: SIGINT received again while stopping" in output, output
    assert "in never_stops" in output, output


async def test_a_rebalance_that_stops_advancing_fails_healthz_and_says_what_it_waits_for(
    settings: Settings, tmp_path: Path
) -> None:
    worker = _stuck(settings, tmp_path, shutdown_seconds=10, where="recovery")
    try:
        report = json.loads(await worker.logged("rebalance stuck", within=90))["message"]
        status, health = await asyncio.to_thread(get_status, f"{worker.web}/healthz")
        described = await asyncio.to_thread(worker.describe, 1)  # what a failing test shows of it
    finally:
        code = worker.stop()
    assert report.startswith("rebalance stuck: no progress for "), report
    assert "in never_answers" in report, report  # what the recovery awaits, down its await chain
    assert "in _restart_recovery" in report, report
    assert (status, json.loads(health)["alive"]) == (503, False), health
    assert "/readyz: " in described, described
    assert '"tables_recovered":false' in described.replace(" ", ""), described
    assert "rebalance stuck" in described, described  # its report, whether or not the last line
    assert code == 0, worker.output()  # stuck in a rebalance, not in its stop
