"""The reporter on the real broker: a Codex app-server session, through the spool and the Kafka delivery, onto the
engine's snapshot topic keyed by thread, each thread's snapshots in order."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from api.app import create_app
from api.server import running
from api.settings import ApiSettings
from api.tokens import Role, issue_token
from core.settings import Settings
from core.topics import SESSION_EVENTS, SNAPSHOTS
from reporter.cli import APP_SERVER_STATE
from reporter.delivery.kafka import KafkaDelivery
from reporter.delivery.spool import Spool
from reporter.delivery.spooled import SpooledDelivery
from reporter.reporter import Reporter, run_app_server
from schemas import SESSION_EVENT_ADAPTER, Codec, SessionEvent, ThreadContextSnapshot
from sinks.migrations import migrate
from streams.topic_admin import ensure_topics
from tests.unit.api.fakes import SECRET
from tests.unit.reporter.conftest import FIXTURES
from tests.unit.reporter.test_reporter import (
    IDENTITY,
    _Clock,
    _compaction_line,
    _report_app_server,
    _ticking,
    _usage_line,
)

pytestmark = pytest.mark.kafka

CTXBUDGET = Path(sys.executable).parent / "ctxbudget"
"""The console script a user runs, installed beside this interpreter."""


def run_report(settings: Settings, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`ctxbudget report ...` as a user runs it, configured by the environment the README documents."""
    env = {
        **os.environ,
        "CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers or "",
        "CTXBUDGET_TOPIC_PREFIX": settings.topic_prefix,
        "CTXBUDGET_DATA_DIR": str(settings.data_dir),
        "CTXBUDGET_NODE_ID": "mac-01",
        "CTXBUDGET_WORKER_ID": "worker-mac-01",
        "CTXBUDGET_PROJECT_ID": "proj-001",
    }
    command = [str(CTXBUDGET), "report", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


async def _read(settings: Settings, topic: str, count: int) -> list[tuple[bytes, ThreadContextSnapshot]]:
    codec = Codec(ThreadContextSnapshot)
    servers = settings.kafka_bootstrap_servers
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest")
    await consumer.start()
    received: list[tuple[bytes, ThreadContextSnapshot]] = []
    try:
        while len(received) < count:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=30)
            for records in batches.values():
                received.extend((r.key, codec.decode(r.value)) for r in records)
    finally:
        await consumer.stop()
    return received


async def test_an_app_server_session_lands_on_snapshots_keyed_by_thread_in_order(settings: Settings, tmp_path) -> None:
    app_server_lines = (FIXTURES / "app_server_session.jsonl").read_text().splitlines()
    await ensure_topics(settings)
    kafka = KafkaDelivery(settings.kafka_bootstrap_servers or "", settings.topic_prefix)
    await kafka.start()
    spooled = SpooledDelivery(Spool(tmp_path / "spool"), kafka, drain_seconds=30)
    await spooled.start()
    clock = _Clock()
    reporter = Reporter(IDENTITY, spooled, clock=clock)
    await run_app_server(reporter, _ticking(app_server_lines, clock, reporter))
    await spooled.close()

    expected = await _report_app_server(app_server_lines)
    assert spooled.delivered == len(expected)
    assert len(Spool(tmp_path / "spool")) == 0
    received = await _read(settings, settings.topic(SNAPSHOTS), len(expected))
    assert all(key == snapshot.thread_id.encode() for key, snapshot in received)
    for thread in {s.thread_id for s in expected}:
        assert [s for _, s in received if s.thread_id == thread] == [s for s in expected if s.thread_id == thread]


async def test_the_report_command_sends_straight_to_kafka(settings: Settings) -> None:
    await ensure_topics(settings)
    done = await asyncio.to_thread(
        run_report, settings, "--from", "codex-app-server", "--input", str(FIXTURES / "app_server_session.jsonl")
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    summary = re.search(r"spooled (\d+) snapshots, delivered (\d+), rejected 0, left 0", done.stderr)
    assert summary, done.stderr
    spooled, delivered = map(int, summary.groups())
    assert spooled == delivered > 0  # how many: the cadence merges lines that arrive together
    received = await _read(settings, settings.topic(SNAPSHOTS), delivered)
    assert [(s.thread_id, s.compaction_count) for _, s in received][-1] == ("thr_a", 1)


def worker_token(secret: bytes) -> str:
    return issue_token(secret, Role.WORKER, "worker-mac-01", ["proj-001"], ttl=timedelta(minutes=10))


@pytest.mark.clickhouse
async def test_a_wrong_token_keeps_every_snapshot_and_says_so_until_the_right_one_delivers_them(
    settings: Settings, clickhouse: Any, tmp_path: Path, worker_state: Path
) -> None:
    migrate(clickhouse)
    await ensure_topics(settings)
    session = str(FIXTURES / "app_server_session.jsonl")
    nothing_new = tmp_path / "empty.jsonl"
    nothing_new.write_text("")
    spool_dir = worker_state / "spool"
    app = create_app(settings, clickhouse, ApiSettings(), secret=SECRET)
    async with running(app, "127.0.0.1", 0) as api_url:
        wrong = worker_token(b"a-secret-that-is-not-the-apis-own-32+bytes")
        refused = await asyncio.to_thread(
            run_report,
            settings,
            "--from",
            "codex-app-server",
            "--input",
            session,
            "--api-url",
            api_url,
            "--token",
            wrong,
        )
        assert refused.returncode == 1, refused.stderr
        spooled = [record.snapshot for record in Spool(spool_dir)]
        assert spooled
        assert f"delivered 0, rejected 0, left {len(spooled)} (kept for the next run)" in refused.stderr
        assert "401" in refused.stderr  # the log says why
        saved = json.loads((spool_dir / APP_SERVER_STATE).read_text())
        assert saved["threads"]["thr_a"]["compaction_count"] == 1  # for the next run (20.13)

        right = worker_token(SECRET)
        delivered = await asyncio.to_thread(
            run_report, settings, "--from", "codex-app-server", "--input", str(nothing_new), "--api-url", api_url,
            "--token", right,
        )  # fmt: skip
        assert delivered.returncode == 0, delivered.stderr
        assert f"delivered {len(spooled)}, rejected 0, left 0" in delivered.stderr
    received = await _read(settings, settings.topic(SNAPSHOTS), len(spooled))
    assert sorted(s.snapshot_id for _, s in received) == sorted(s.snapshot_id for s in spooled)


async def _events(settings: Settings, count: int) -> list[tuple[bytes, SessionEvent]]:
    topic = f"{settings.topic_prefix}{SESSION_EVENTS}"
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=settings.kafka_bootstrap_servers, auto_offset_reset="earliest")
    await consumer.start()
    received: list[tuple[bytes, SessionEvent]] = []
    try:
        while len(received) < count:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=30)
            for records in batches.values():
                received.extend((r.key, SESSION_EVENT_ADAPTER.validate_json(r.value)) for r in records)
    finally:
        await consumer.stop()
    return received


@pytest.mark.clickhouse
async def test_a_compaction_before_fresh_usage_reaches_session_events_straight_and_through_the_api(
    settings: Settings, clickhouse: Any, tmp_path: Path
) -> None:
    migrate(clickhouse)
    await ensure_topics(settings)
    sessions = {}
    for thread in ("thr_kafka", "thr_api"):
        sessions[thread] = tmp_path / f"{thread}.jsonl"
        sessions[thread].write_text(f"{_usage_line(thread, 240_000)}\n{_compaction_line(thread)}\n")
    straight = await asyncio.to_thread(
        run_report, settings, "--from", "codex-app-server", "--input", str(sessions["thr_kafka"])
    )
    assert straight.returncode == 0, straight.stderr
    app = create_app(settings, clickhouse, ApiSettings(), secret=SECRET)
    async with running(app, "127.0.0.1", 0) as api_url:
        via_api = await asyncio.to_thread(
            run_report, settings, "--from", "codex-app-server", "--input", str(sessions["thr_api"]),
            "--api-url", api_url, "--token", worker_token(SECRET),
        )  # fmt: skip
    assert via_api.returncode == 0, via_api.stderr
    received = await _events(settings, 4)
    assert sorted((key, event.type, event.thread_id, event.tokens_before) for key, event in received) == [
        (b"thr_api", "compaction_completed", "thr_api", 240_000),
        (b"thr_api", "compaction_started", "thr_api", 240_000),
        (b"thr_kafka", "compaction_completed", "thr_kafka", 240_000),
        (b"thr_kafka", "compaction_started", "thr_kafka", 240_000),
    ]
    assert {event.worker_id for _, event in received} == {"worker-mac-01"}
