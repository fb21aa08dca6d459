"""A worker whose stop hangs still exits: after `shutdown_seconds`, or at once on a second Ctrl-C, with the stacks
that show what it was waiting for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streams.local_kafka import free_port

pytestmark = pytest.mark.kafka


def _start(kafka_bootstrap: str, data_dir: Path, shutdown_seconds: float) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_")}
    env.update(
        CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
        CTXBUDGET_DATA_DIR=str(data_dir),
        CTXBUDGET_APP_ID=f"stuck-{data_dir.name}",
        CTXBUDGET_WORKER_WEB_PORT=str(free_port()),
        CTXBUDGET_SHUTDOWN_SECONDS=str(shutdown_seconds),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.stuck_worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _read_until(process: subprocess.Popen[str], line: str, seen: list[str]) -> None:
    assert process.stdout is not None
    while (got := process.stdout.readline()) != f"{line}\n":
        assert got, f"exited before printing {line!r}:\n{''.join(seen)}"
        seen.append(got)


def _finish(process: subprocess.Popen[str], seen: list[str]) -> str:
    try:
        rest, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        rest, _ = process.communicate()
        raise AssertionError("the worker did not exit:\n" + "".join(seen) + rest) from None
    return "".join(seen) + rest


def test_a_stop_that_hangs_ends_after_shutdown_seconds_with_the_stacks(kafka_bootstrap: str, tmp_path: Path) -> None:
    process = _start(kafka_bootstrap, tmp_path / "w", shutdown_seconds=2)
    seen: list[str] = []
    _read_until(process, "started", seen)
    process.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    output = _finish(process, seen)
    assert process.returncode == 1, output
    assert time.monotonic() - signalled >= 2, output
    assert "shutdown abandoned: still stopping 2 s after SIGINT" in output, output
    assert "in never_stops" in output, output  # the stuck task's stack names what it awaited


def test_a_second_ctrl_c_ends_a_hanging_stop_at_once(kafka_bootstrap: str, tmp_path: Path) -> None:
    process = _start(kafka_bootstrap, tmp_path / "w", shutdown_seconds=600)
    seen: list[str] = []
    _read_until(process, "started", seen)
    process.send_signal(signal.SIGINT)
    _read_until(process, "stopping", seen)
    process.send_signal(signal.SIGINT)
    output = _finish(process, seen)
    assert process.returncode == 1, output
    assert "shutdown abandoned: SIGINT received again while stopping" in output, output
    assert "in never_stops" in output, output
