"""A broker outage under the real processes: `ctxbudget run` (worker and API) and `ctxbudget api` on a local broker
of the test's own, stopped and started again. Readiness follows the broker, the log says so in a few lines instead
of a flood, and one Ctrl-C stops the API while the broker is away."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from api.cli import operator_token
from core.settings import Settings
from streams.local_kafka import LocalKafka, free_port
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import WorkerProcess, get_status, get_when_up
from tests.samples import SPEC_REPORT_REQUEST, dumps

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

STARTUP_SECONDS = 120
OUTAGE_SECONDS = 20
LOUD = re.compile(r'"level": "(WARNING|ERROR|CRITICAL)"')


@pytest.fixture
def broker(tmp_path: Path):
    defaults = Settings()
    local = LocalKafka(tmp_path / "kafka", defaults.kafka_version, defaults.kafka_cache_dir)
    local.up()
    try:
        yield local
    finally:
        local.down()


def _settings(broker: LocalKafka, tmp_path: Path) -> Settings:
    settings = Settings(
        kafka_bootstrap_servers=broker.bootstrap(), data_dir=tmp_path, topic_prefix=f"o{uuid.uuid4().hex[:6]}."
    )
    asyncio.run(ensure_topics(settings))
    return settings


def _until_status(url: str, status: int, within: float) -> str:
    deadline = time.monotonic() + within
    while True:
        got, body = get_status(url)
        if got == status:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} answered {got} {body}, not {status}, for {within} s")
        time.sleep(0.5)


def test_readiness_follows_the_broker_and_the_log_stays_short(broker: LocalKafka, tmp_path: Path) -> None:
    settings = _settings(broker, tmp_path)
    worker = WorkerProcess(settings, tmp_path / "worker", CTXBUDGET_LOG_LEVEL="WARN").start()
    try:
        api = _printed(worker, "web page and API: ").split()[0].rstrip("/")
        get_when_up(f"{api}/healthz", STARTUP_SECONDS, worker.alive)
        _until_status(f"{worker.web}/readyz", 200, STARTUP_SECONDS)
        _until_status(f"{api}/readyz", 200, 30)
        before = len(worker.output().splitlines())

        broker.down()
        assert json.loads(_until_status(f"{worker.web}/readyz", 503, 10))["checks"]["kafka"] is False
        assert json.loads(_until_status(f"{api}/readyz", 503, 10))["checks"]["kafka"] is False
        time.sleep(OUTAGE_SECONDS)
        assert broker.up() == settings.kafka_bootstrap_servers  # the same address: clients reconnect
        _until_status(f"{worker.web}/readyz", 200, STARTUP_SECONDS)
        _until_status(f"{api}/readyz", 200, 30)
        time.sleep(3)  # the probe's next round logs the return

        during = worker.output().splitlines()[before:]
        loud = [line for line in during if LOUD.search(line)]
        print(f"{len(during)} lines during a {OUTAGE_SECONDS} s outage, warnings and errors:", *loud, sep="\n")
        assert any("Kafka reachable again" in line for line in loud), "\n".join(during[-40:])
        # one line as the broker left, a reminder per 30 s, one as it came back (and slack for Faust's own lines)
        assert len(loud) <= 8, "\n".join(loud[:40])
    finally:
        code = worker.stop()
    assert code == 0, worker.describe()


def test_one_ctrl_c_stops_the_api_while_the_broker_is_down(broker: LocalKafka, tmp_path: Path) -> None:
    settings = _settings(broker, tmp_path)
    port = free_port()
    api = WorkerProcess(settings, tmp_path / "api", module="streams api", CTXBUDGET_API_PORT=str(port)).start()
    try:
        get_when_up(f"http://127.0.0.1:{port}/healthz", STARTUP_SECONDS, api.alive)
        broker.down()
        _until_status(f"http://127.0.0.1:{port}/readyz", 503, 10)
        # A report while the broker is away waits for Kafka, answers 503, and leaves its record in the producer.
        token = operator_token(Settings(data_dir=tmp_path / "api"))
        assert _report(f"http://127.0.0.1:{port}", token) == 503
        started = time.monotonic()
        code = api.stop(timeout=30)  # one SIGINT; a second one is never sent
        stopped_in = time.monotonic() - started
    finally:
        api.stop()
    assert code == 0, api.output()
    assert stopped_in < 15, f"stopped {stopped_in:.0f} s after one Ctrl-C\n{api.output()[-3000:]}"


def _report(api: str, token: str) -> int:
    request = urllib.request.Request(
        f"{api}/api/v1/workers/{SPEC_REPORT_REQUEST['worker_id']}/thread-context",
        data=dumps(SPEC_REPORT_REQUEST | {"captured_at": datetime.now(UTC).isoformat()}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _printed(worker: WorkerProcess, label: str) -> str:
    return asyncio.run(worker.printed(label, within=STARTUP_SECONDS))
