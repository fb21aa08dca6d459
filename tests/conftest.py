"""Fixtures for the real services: Apache Kafka and ClickHouse.

Kafka: `CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS` if set, else a testcontainers broker when a Docker engine answers, else the
project's local Apache Kafka (started once per test session in a temporary folder, stopped at the end).
ClickHouse: `CTXBUDGET_CLICKHOUSE_DSN` if set, else testcontainers' ClickHouse when Docker answers, else embedded chdb
in a temporary folder.

A service that cannot be had fails the tests that need it; it never skips them. Under CI any skipped test fails the run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    configured = os.environ.get("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    from streams.local_kafka import LocalKafka

    settings = Settings()
    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), settings.kafka_version, settings.kafka_cache_dir)
    try:
        yield broker.up()
    finally:
        broker.destroy()


@pytest.fixture(scope="session")
def clickhouse_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    configured = os.environ.get("CTXBUDGET_CLICKHOUSE_DSN")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.clickhouse import ClickHouseContainer

        with ClickHouseContainer() as container:
            yield container.get_connection_url().replace("clickhouse://", "http://", 1)
        return
    yield f"chdb://{tmp_path_factory.mktemp('clickhouse') / 'db'}"


@pytest.fixture(scope="session")
def clickhouse(clickhouse_dsn: str):
    """One client for the whole session: chdb allows a single owner of a data path per process."""
    from sinks.clickhouse import connect

    client = connect(clickhouse_dsn)
    yield client
    client.close()


@contextlib.contextmanager
def fresh_database(client: Any) -> Iterator[Any]:
    """The client switched to an empty database of its own for the block (chdb allows one client per data path)."""
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    client.command(f"CREATE DATABASE {name}")
    previous = client.query("SELECT currentDatabase()").result_rows[0][0]
    client.database = name
    try:
        yield client
    finally:
        client.database = previous
        client.command(f"DROP DATABASE {name}")


@pytest.fixture
def fresh_db(clickhouse: Any) -> Iterator[Any]:
    """An empty database on the session's client."""
    with fresh_database(clickhouse) as client:
        yield client


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    """Settings pointing at the test broker, with a topic prefix of its own so tests never share topics."""
    return Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        data_dir=tmp_path,
        topic_prefix=f"t{uuid.uuid4().hex[:8]}.",
        topic_partitions=2,
    )


@pytest.fixture(autouse=True)
def worker_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own worker state directory (never the user's ~/.local/state), inherited by the processes it
    starts."""
    directory = tmp_path / "worker-state"
    monkeypatch.setenv("CTXBUDGET_WORKER_STATE_DIR", str(directory))
    return directory


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a skip means a real service was missing or a test was switched off: that is a failure, not a pass."""
    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and exitstatus == 0:
        with contextlib.suppress(Exception):
            reporter.write_line(f"CI: {len(skipped)} test(s) skipped; skips fail the run in CI", red=True)
        session.exitstatus = 1
