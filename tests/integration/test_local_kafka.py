"""The local Apache Kafka harness: up answers metadata, data survives a restart, down leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from core.settings import Settings
from streams.local_kafka import LocalKafka, LocalKafkaError, broker_answers
from streams.topic_admin import ensure_topics

pytestmark = pytest.mark.kafka


def _broker_processes(state_dir: Path) -> list[str]:
    result = subprocess.run(
        ["pgrep", "-f", f"kafka.Kafka.*{state_dir}|{state_dir}.*kafka.Kafka"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.split()


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send(topic, value, key=b"k")
        await producer.flush()
    finally:
        await producer.stop()


async def _consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    values: list[bytes] = []
    try:
        while len(values) < expected:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=30)
            values.extend(r.value for records in batches.values() for r in records)
    finally:
        await consumer.stop()
    return values


def test_up_restart_down_keeps_data_and_leaves_no_process(tmp_path: Path) -> None:
    defaults = Settings()
    broker = LocalKafka(tmp_path / "kafka", defaults.kafka_version, defaults.kafka_cache_dir)
    try:
        bootstrap = broker.up()
        assert broker.status().running
        assert broker.status().bootstrap == bootstrap
        assert broker.up() == bootstrap  # already running: same broker, no second process
        assert len(_broker_processes(broker.state_dir)) == 1

        settings = Settings(kafka_bootstrap_servers=bootstrap, topic_prefix="restart.", topic_partitions=1)
        asyncio.run(ensure_topics(settings))
        asyncio.run(_produce(bootstrap, settings.topic("snapshots"), [b"a", b"b", b"c"]))

        assert broker.down() is True
        assert _broker_processes(broker.state_dir) == []
        assert not broker.status().running
        assert asyncio.run(broker_answers(bootstrap, timeout_s=1.0)) is False

        assert broker.up() == bootstrap  # same ports reused, so clients keep their address
        assert asyncio.run(_consume_all(bootstrap, settings.topic("snapshots"), 3)) == [b"a", b"b", b"c"]
    finally:
        broker.down()
    assert _broker_processes(broker.state_dir) == []
    assert broker.down() is False


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    defaults = Settings()
    broker = LocalKafka(tmp_path / "kafka", defaults.kafka_version, defaults.kafka_cache_dir)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(LocalKafkaError, match=f"port {taken}"):
            broker.up(port=taken)
    assert broker.status().running is False


def test_cli_kafka_up_status_down(tmp_path: Path) -> None:
    env = {**os.environ, "CTXBUDGET_DATA_DIR": str(tmp_path)}
    env.pop("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", None)

    def ctxbudget(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streams", *args], env=env, capture_output=True, text=True, timeout=180, check=False
        )

    up = ctxbudget("kafka", "up")
    assert up.returncode == 0, up.stderr
    bootstrap = up.stdout.strip().splitlines()[-1]
    assert bootstrap.startswith("127.0.0.1:")
    status = ctxbudget("kafka", "status")
    assert status.returncode == 0
    assert f'"bootstrap": "{bootstrap}"' in status.stdout
    assert ctxbudget("kafka", "down").stdout.strip() == "stopped"
    assert ctxbudget("kafka", "status").returncode == 1
    assert _broker_processes(tmp_path / "kafka") == []


def test_the_broker_keeps_its_ports_across_restarts_with_connections_in_time_wait(tmp_path: Path) -> None:
    defaults = Settings()
    broker = LocalKafka(tmp_path / "kafka", defaults.kafka_version, defaults.kafka_cache_dir)
    try:
        bootstrap = broker.up()
        controller = json.loads((broker.state_dir / "ports.json").read_text())["controller"]
        settings = Settings(kafka_bootstrap_servers=bootstrap, topic_prefix="ports.", topic_partitions=1)
        asyncio.run(ensure_topics(settings))
        for round_ in range(3):
            # Clients connected when the broker stops: its ends of those connections linger in TIME_WAIT.
            asyncio.run(_produce(bootstrap, settings.topic("snapshots"), [f"{round_}".encode()]))
            broker.down()
            assert broker.up() == bootstrap, f"restart {round_ + 1} moved the broker"
            assert json.loads((broker.state_dir / "ports.json").read_text())["controller"] == controller
    finally:
        broker.down()
