"""Drift between the declared and the actual topics, status formatting, JSON log lines, readiness on the API."""

from __future__ import annotations

import io
import json
import logging
import socket
from pathlib import Path

import orjson
from fastapi.testclient import TestClient
from rich.console import Console

from core.health import ClickHouseProbe, KafkaProbe
from core.logs import logging_config
from core.settings import Settings
from core.topics import DEADLETTER_MAX_BYTES, MAX_MESSAGE_BYTES
from sinks.tables import ROUTES
from streams.status import StatusReport, as_json, consumed_topics, count_stale, lag_rows, render, sink_backlog
from streams.topic_admin import Drift, TopicShape, declared_topics, drift
from tests.unit.api.fakes import RecordingPublisher, make_app

SETTINGS = Settings(topic_prefix="ctx.", topic_partitions=4, app_id="ctxbudget")


def test_every_declared_topic_and_each_tables_changelog_is_declared_compacted_where_it_holds_state() -> None:
    declared = {t.name: t for t in declared_topics(SETTINGS, ["thread-slots"])}
    assert declared["ctx.thread-state"].configs["cleanup.policy"] == "compact"
    assert declared["ctx.alerts"].configs["cleanup.policy"] == "delete"
    changelog = {"cleanup.policy": "compact", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    assert declared["ctxbudget-thread-slots-changelog"].configs == changelog
    assert {t.partitions for t in declared.values()} == {4}
    # Every topic takes what an output may weigh; the dead letters, whole inputs in base64, take more.
    sizes = {name: int(t.configs["max.message.bytes"]) for name, t in declared.items()}
    assert sizes.pop("ctx.deadletter") == DEADLETTER_MAX_BYTES > MAX_MESSAGE_BYTES * 4 // 3 + 65_536
    assert set(sizes.values()) == {MAX_MESSAGE_BYTES}


def test_a_matching_topic_has_no_drift_and_a_missing_or_altered_one_says_what_differs() -> None:
    spec = next(t for t in declared_topics(SETTINGS, []) if t.name == "ctx.alerts")
    same = TopicShape(spec.name, 4, 1, {**spec.configs, "segment.bytes": "1073741824"})
    assert drift(spec, same) == []
    assert drift(spec, None) == [Drift("ctx.alerts", "exists", "yes", None)]
    altered = TopicShape(spec.name, 2, 1, {**spec.configs, "retention.ms": "1000"})
    assert {(d.setting, d.actual) for d in drift(spec, altered)} == {("partitions", "2"), ("retention.ms", "1000")}


def test_status_rows_count_lag_from_the_committed_offset_and_sink_backlog_sums_the_sink_topics() -> None:
    rows = lag_rows({("ctx.alerts", 0): 5}, {("ctx.alerts", 0): 8, ("ctx.alerts", 1): 3, ("ctx.snapshots", 0): 2})
    assert [(r.partition, r.lag, r.last_processed) for r in rows if r.topic == "ctx.alerts"] == [
        (0, 3, 4),
        (1, 3, None),
    ]
    assert sink_backlog(rows, ["ctx.alerts"]) == 6
    report = StatusReport("ctxbudget", rows, threads=2, stale_threads=1, sink_backlog=6)
    body = json.loads(as_json(report))
    assert body["partitions"][0] == {
        "topic": "ctx.alerts",
        "partition": 0,
        "committed": 5,
        "end": 8,
        "lag": 3,
        "last_processed": 4,
    }
    assert body["stale_threads"] == 1
    console = Console(file=io.StringIO(), width=120)
    console.print(render(report))
    assert "ctx.snapshots" in console.file.getvalue()


def test_stale_threads_are_counted_from_the_newest_value_per_key_and_tombstones_remove_a_thread() -> None:
    latest = {b"a": orjson.dumps({"stale": True}), b"b": orjson.dumps({"stale": False}), b"c": None}
    assert count_stale(latest) == (2, 1)


def test_json_log_lines_carry_thread_and_project_ids() -> None:
    config = logging_config("INFO", "json")
    stream = io.StringIO()
    config["handlers"]["stderr"]["stream"] = stream
    logging.config.dictConfig(config)
    try:
        logging.getLogger("t").info("alert open", extra={"thread_id": "th-1", "project_id": "p-1"})
    finally:
        logging.config.dictConfig(logging_config("WARNING", "text"))
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["level"] == "INFO"
    assert line["thread_id"] == "th-1"
    assert line["project_id"] == "p-1"
    assert line["message"] == "alert open"


def test_api_readiness_follows_clickhouse_and_kafka_and_metrics_are_prometheus_text(tmp_path: Path) -> None:
    up = {"value": True}
    app = make_app(tmp_path, RecordingPublisher())
    app.state.clickhouse_probe = ClickHouseProbe(lambda: up["value"], cache_seconds=0)
    broker = socket.socket()
    broker.bind(("127.0.0.1", 0))
    broker.listen()
    app.state.kafka_probe = KafkaProbe(f"127.0.0.1:{broker.getsockname()[1]}", cache_seconds=0)
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"alive": True}
        assert client.get("/readyz").status_code == 200
        up["value"] = False
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["checks"]["clickhouse"] is False
        assert "ctxbudget_clickhouse_up 0.0" in client.get("/metrics").text
        up["value"] = True
        assert client.get("/readyz").status_code == 200
        broker.close()  # the broker goes away: the API is not ready, whatever its producer thinks
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["checks"]["kafka"] is False


def test_status_reads_the_lag_of_the_topics_its_roles_read_and_a_sink_backlog_only_with_the_sinks(
    tmp_path: Path,
) -> None:
    def read(roles: str) -> set[str]:
        return consumed_topics(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles=roles))

    engine = {
        "ctx.snapshots",
        "ctx.session-events",
        "ctx.handoff-packages",
        "ctx.alert-commands-by-thread",
        "ctx.master-action-commands",
        "ctx.conversation-links",  # the routing runs in the engine's fold
        "ctx.task-importance",
    }
    assert read("engine") == engine | {"ctx.policies", "ctx.alert-commands", "ctx.compaction-points"}
    assert read("sinks") == {f"ctx.{route}" for route in ROUTES}
    assert read("engine,projection,aggregates,sinks") >= engine | {"ctx.conversations", "ctx.thread-state-by-project"}
    report = StatusReport("ctxbudget-engine", [], threads=3, stale_threads=0, sink_backlog=None)
    assert json.loads(as_json(report))["sink_backlog"] is None
    console = Console(file=io.StringIO(), width=120)
    console.print(render(report))
    totals = console.file.getvalue().splitlines()[-2]  # threads, stale threads, sink backlog, total lag
    assert [cell.strip() for cell in totals.split("│")[1:-1]] == ["3", "0", "-", "0"]
