"""`ctxbudget run` on embedded defaults: brings up Kafka, topics and ClickHouse, runs, and cleans up on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.settings import Settings
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import WorkerProcess, get_json, get_when_up

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
WARNING_OR_WORSE = re.compile(r'"level": "(WARN|WARNING|ERROR|CRITICAL)"|\b(WARN|WARNING|ERROR|CRITICAL)\b')


def test_run_on_embedded_defaults_starts_everything_and_stops_its_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_") or k == "CTXBUDGET_KAFKA_CACHE_DIR"}
    env["CTXBUDGET_DATA_DIR"] = str(tmp_path)
    env["CTXBUDGET_API_PORT"] = "0"  # any free port: `run` prints the one it got
    env["CTXBUDGET_WORKER_WEB_PORT"] = str(free_port())
    env["CTXBUDGET_PROGRESS_SECONDS"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(
            any(label in line for line in lines) for label in ("web page and API:", "records in ")
        ):
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            lines.append(line)
        output = "".join(lines)
        assert re.search(r"created [1-9][0-9]* topics", output), output
        assert re.search(
            rf"clickhouse: chdb://{tmp_path.resolve()}/clickhouse \([1-9][0-9]* migrations applied\)", output
        )
        # The token is in a file of the operator's only, not in the output a log would capture.
        assert JWT.search(output) is None, output
        token_file = re.search(r"^operator token: (\S+) ", output, re.MULTILINE)
        assert token_file, output
        assert Path(token_file[1]) == tmp_path.resolve() / "operator-token"
        assert stat.S_IMODE(Path(token_file[1]).stat().st_mode) == 0o600
        assert JWT.fullmatch(Path(token_file[1]).read_text().strip())
        address = re.search(r"web page and API: (http://127\.0\.0\.1:[1-9][0-9]*/) ", output)
        assert address, output
        page = get_when_up(address[1], within=60)
        assert "<html" in page.lower()
        assert re.search(r"records in \d+ \(\d+/s\) \| threads: safe \d+ watch \d+ urgent \d+ critical \d+", output)
        assert process.poll() is None, "the worker exited on its own:\n" + output + process.stdout.read()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            rest, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            rest, _ = process.communicate()
    assert process.returncode == 0, output + rest
    # A healthy start and stop (a fresh broker, whose group coordinator comes up after the worker) warns of nothing.
    assert [line for line in (output + rest).splitlines() if WARNING_OR_WORSE.search(line)] == [], output + rest
    # The broker `run` started is gone, and the database it migrated is there for the next run.
    status = subprocess.run(
        [sys.executable, "-m", "streams", "kafka", "status"], env=env, capture_output=True, text=True, check=False
    )
    assert status.returncode == 1
    assert '"running": false' in status.stdout
    again = subprocess.run(
        [sys.executable, "-m", "streams", "migrate"], env=env, capture_output=True, text=True, check=False
    )
    assert again.stdout.strip() == "up to date", again.stderr


async def test_run_simulate_registers_the_fleets_conversations_and_reports_no_time_ahead_of_now(
    settings: Settings, tmp_path: Path
) -> None:
    """The README's `ctxbudget run --simulate N`: the home list shows the fleet as a deployment would register it
    (single_device per thread, group per project, one master_agent on a fleet thread), dated by the wall clock."""
    settings = settings.model_copy(update={"app_id": f"sim-{uuid.uuid4().hex[:6]}"})
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker", module="streams run --simulate 400").start()
    try:
        api = (await worker.printed("web page and API: ", within=120)).split()[0].rstrip("/")
        token_file = Path((await worker.printed("operator token: ")).split()[0])
        token = (await asyncio.to_thread(token_file.read_text)).strip()
        deadline = time.monotonic() + 120
        while True:
            try:
                items = (await asyncio.to_thread(get_json, f"{api}/api/v1/conversations?limit=500", token))["items"]
            except OSError:
                items = []
            types = {item["conversation_type"] for item in items}
            compacted = [
                detail
                for item in items
                if item["conversation_type"] == "single_device"
                for detail in [await _detail(api, token, item["conversation_id"])]
                if detail and detail.get("last_compaction_at")
            ]
            if types == {"single_device", "group", "master_agent"} and compacted:
                break
            assert time.monotonic() < deadline, f"types {types}, {len(compacted)} compacted\n{worker.describe()}"
            await asyncio.sleep(2)
        now = datetime.now(UTC)
        for detail in compacted:
            for name in ("last_compaction_at", "updated_at"):
                assert datetime.fromisoformat(detail[name]) <= now, (name, detail)
        for item in items:
            if item.get("context_budget_updated_at"):
                assert datetime.fromisoformat(item["context_budget_updated_at"]) <= now, item
    finally:
        code = worker.stop()
    assert code == 0, worker.describe()


async def _detail(api: str, token: str, conversation_id: str) -> dict | None:
    """The thread page of a simulated single_device conversation (`conv-<thread>`), or None before it exists."""
    thread = conversation_id.removeprefix("conv-")
    try:
        return await asyncio.to_thread(get_json, f"{api}/api/v1/threads/{thread}/context-budget", token)
    except OSError:
        return None
