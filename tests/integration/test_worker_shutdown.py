"""A worker whose stop hangs still exits: after `shutdown_seconds`, or at once on a second Ctrl-C, with the stacks
that show what it was waiting for."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from streams.settings import Settings
from tests.integration.pipeline import WorkerProcess

pytestmark = pytest.mark.kafka


def _stuck(settings: Settings, tmp_path: Path, shutdown_seconds: float) -> WorkerProcess:
    """`tests.integration.stuck_worker`: prints `started`, then `stopping` once its stop begins, which never ends."""
    return WorkerProcess(
        settings.model_copy(update={"app_id": f"stuck-{tmp_path.name}"}),
        tmp_path / "worker",
        module="tests.integration.stuck_worker",
        CTXBUDGET_SHUTDOWN_SECONDS=str(shutdown_seconds),
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
