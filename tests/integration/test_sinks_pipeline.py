"""Simulator -> engine -> sinks -> ClickHouse on the real broker and embedded chdb: each table holds exactly what its
topics carried, also after a SIGKILL in the middle of the stream.

A worker owns its chdb path, so ClickHouse is read after the worker stopped. "Done" is the consumer group's committed
offsets reaching the end of every topic (the sinks commit a record only once it is in ClickHouse), stable for a while.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from core.settings import Settings
from core.topics import TOPICS
from schemas import DecodeError
from sinks.rows import TableSpec
from sinks.tables import ROUTES
from sinks.writer import SINK_BATCHES
from streams.simulator import SimRecord, SimulationConfig, generate
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import WorkerProcess, committed_offsets, committed_records, produce

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

# Simulated time is in the past: keep wall-clock timers out. Small batches: many flushes, and a kill lands among them.
SINK_ENV = {
    "CTXBUDGET_STALE_FACTOR": "100000",
    "CTXBUDGET_HANDOFF_TTL_SECONDS": "1e9",
    "CTXBUDGET_BATCH_SIZE": "200",
    "CTXBUDGET_SINK_BATCH_ROWS": "50",
    "CTXBUDGET_SINK_BATCH_MS": "300",
}

HISTORY_IDS: dict[str, tuple[str, ...]] = {
    "thread_context_snapshots": ("snapshot_id",),
    "thread_context_snapshot_inputs": ("snapshot_id", "accepted", "verdict"),
    "context_events": ("event_id",),
    "alert_transitions": ("alert_id", "alert_status"),
    "compaction_events": ("event_id",),
    "master_actions": ("action_id", "state"),
    "deadletter": ("source_topic", "partition", "offset"),
    "thread_projection_history": ("thread_id", "projected_tokens", "surface_tokens", "estimate_checks"),
}
"""What tells one history row from another (a record repeated on its topic repeats here too, once per record)."""

Decoded = list[tuple[int, Any]]
"""A topic's decodable records as (offset, record), in per-partition offset order."""


async def _end_offsets(settings: Settings, topics: Iterable[str]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        partitions = [TopicPartition(settings.topic(t), p) for t in topics for p in range(settings.topic_partitions)]
        return await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()


async def _wait_drained(settings: Settings, within: float = 180, settle: float = 4) -> None:
    """Until every topic's committed offset is its end offset, twice `settle` seconds apart with the ends unchanged."""
    deadline, previous = time.monotonic() + within, None
    while True:
        ends = await _end_offsets(settings, (t.name for t in TOPICS))
        committed = await committed_offsets(settings)
        behind = {tp: end - committed.get(tp, 0) for tp, end in ends.items() if committed.get(tp, 0) < end}
        if not behind and ends == previous:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not drained: {behind}")
        previous = None if behind else ends
        await asyncio.sleep(settle if not behind else 1)


async def _read_routes(settings: Settings) -> dict[str, Decoded]:
    """Every record of every routed topic, decoded with its route's codec (what does not decode writes nothing)."""
    ends = {tp: end for tp, end in (await _end_offsets(settings, ROUTES)).items() if end}
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    records: dict[str, Decoded] = {topic: [] for topic in ROUTES}
    try:
        consumer.assign(list(ends))
        await consumer.seek_to_beginning(*ends)
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for tp, messages in (await consumer.getmany(timeout_ms=500)).items():
                topic = tp.topic.removeprefix(settings.topic_prefix)
                for message in messages:
                    try:
                        records[topic].append((message.offset, ROUTES[topic].codec.decode(message.value)))
                    except DecodeError:
                        continue
    finally:
        await consumer.stop()
    return records


def _history_expected(records: dict[str, Decoded]) -> dict[str, Counter[tuple[Any, ...]]]:
    expected: dict[str, Counter[tuple[Any, ...]]] = {table: Counter() for table in HISTORY_IDS}
    for topic, decoded in records.items():
        for target in ROUTES[topic].targets:
            table = target.table
            if table.versioned:
                continue
            positions = [table.column_names.index(c) for c in HISTORY_IDS[table.name]]
            for offset, record in decoded:
                value = record if target.extract is None else target.extract(record)
                if value is None:
                    continue
                row = table.row(value, offset)
                expected[table.name][tuple(_plain(row[i]) for i in positions)] += 1
    return expected


def _latest_expected(records: dict[str, Decoded]) -> dict[str, dict[Any, int]]:
    """Per latest-state table: each key's newest offset (a key lives on one partition of its topic)."""
    expected: dict[str, dict[Any, int]] = {}
    for topic, decoded in records.items():
        for target in ROUTES[topic].targets:
            if not target.table.versioned:
                continue
            latest = expected.setdefault(target.table.name, {})
            for offset, record in decoded:
                value = record if target.extract is None else target.extract(record)
                if value is not None:
                    latest[target.table.row(value, offset)[0]] = offset
    return expected


def _plain(value: Any) -> Any:
    return value.value if hasattr(value, "value") else value


def _history_actual(client: _WorkerDatabase, table: str) -> Counter[tuple[Any, ...]]:
    rows = client.query(f"SELECT {', '.join(HISTORY_IDS[table])} FROM {table}").result_rows
    return Counter(tuple(row) for row in rows)


def _latest_actual(client: _WorkerDatabase, table: TableSpec) -> dict[Any, int]:
    key = table.column_names[0]
    rows = client.query(f"SELECT {key}, version FROM {table.name} FINAL").result_rows
    assert len({k for k, _ in rows}) == len(rows), f"{table.name}: FINAL shows a key twice"
    return {k: int(v) for k, v in rows}


def _assert_tables_match_topics(client: _WorkerDatabase, records: dict[str, Decoded]) -> None:
    for table, expected in _history_expected(records).items():
        actual = _history_actual(client, table)
        assert actual == expected, (
            f"{table}: {sum(expected.values())} records on its topics, {sum(actual.values())} rows; "
            f"missing {list((expected - actual).items())[:5]}, extra {list((actual - expected).items())[:5]}"
        )
    routed_tables = {target.table.name: target.table for route in ROUTES.values() for target in route.targets}
    for name, expected in _latest_expected(records).items():
        assert _latest_actual(client, routed_tables[name]) == expected, f"{name}: FINAL is not each key's newest record"


def _assert_plans_never_overlap(client: _WorkerDatabase) -> None:
    """A restarted sink cut the same batches as before (no two planned ranges of a partition overlap)."""
    rows = client.query(
        f"SELECT topic, partition, first_offset, last_offset FROM {SINK_BATCHES.name} FINAL"
        " ORDER BY topic, partition, first_offset"
    ).result_rows
    for (topic, partition, _, last), (next_topic, next_partition, first, _) in itertools.pairwise(rows):
        if (topic, partition) == (next_topic, next_partition):
            assert first > last, f"{topic}[{partition}]: ranges overlap at {first}..{last}"


async def _produce_paced(settings: Settings, records: list[SimRecord], chunk: int, pause: float) -> None:
    for start in range(0, len(records), chunk):
        await produce(settings, [(r.topic, r.key, r.value) for r in records[start : start + chunk]])
        await asyncio.sleep(pause)


class _WorkerDatabase:
    """The stopped worker's chdb, read from a child process: chdb allows one data path per process, and this test
    process may already have opened another (the `clickhouse` fixture of other tests)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def query(self, sql: str) -> SimpleNamespace:
        script = (
            "import json, sys\n"
            "from sinks.clickhouse import connect\n"
            "rows = connect(sys.argv[1]).query(sys.argv[2]).result_rows\n"
            "print(json.dumps([list(row) for row in rows], default=str))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, self.dsn, sql], capture_output=True, text=True, check=True, timeout=120
        )
        return SimpleNamespace(result_rows=[tuple(row) for row in json.loads(done.stdout)])

    def close(self) -> None:
        pass


def _open_database(data_dir: Path) -> _WorkerDatabase:
    return _WorkerDatabase(f"chdb://{(data_dir / 'clickhouse').resolve()}")


@pytest.fixture
def sink_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})


async def test_every_routed_record_lands_in_its_tables_exactly_once(sink_settings: Settings, tmp_path: Path) -> None:
    settings = sink_settings
    records = list(generate(SimulationConfig(threads=30, turns_per_thread=30, seed=3)))
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path, **SINK_ENV).start()
    try:
        await produce(settings, [(r.topic, r.key, r.value) for r in records])
        await _wait_drained(settings)
    finally:
        assert worker.stop() == 0, worker.output()
    on_topics = await _read_routes(settings)
    assert all(
        on_topics[t] for t in ("thread-state", "snapshot-verdicts", "context-events", "alerts", "master-actions")
    )
    client = _open_database(tmp_path)
    try:
        _assert_tables_match_topics(client, on_topics)
        _assert_plans_never_overlap(client)
    finally:
        client.close()


async def test_a_sigkill_mid_stream_neither_loses_nor_repeats_a_row(sink_settings: Settings, tmp_path: Path) -> None:
    settings = sink_settings
    records = list(generate(SimulationConfig(threads=60, turns_per_thread=40, seed=11)))
    head, rest = records[: len(records) // 4], records[len(records) // 4 :]
    await ensure_topics(settings)
    first = WorkerProcess(settings, tmp_path, **SINK_ENV).start()
    try:
        await produce(settings, [(r.topic, r.key, r.value) for r in head])
        deadline = time.monotonic() + 120
        # until the sinks wrote (and so committed) some of the engine's outputs
        while committed_records(await committed_offsets(settings), settings.topic("context-events")) < 100:
            assert time.monotonic() < deadline, first.output()
            await asyncio.sleep(0.2)
        producing = asyncio.create_task(_produce_paced(settings, rest, chunk=100, pause=0.05))
        await asyncio.sleep(2)
    finally:
        first.kill()
    assert not producing.done(), "the kill came too late to test recovery"
    await producing

    second = WorkerProcess(settings, tmp_path, **SINK_ENV).start()  # the same chdb path: the killed one's lock is gone
    try:
        await _wait_drained(settings)
    finally:
        assert second.stop() == 0, second.output()
    client = _open_database(tmp_path)
    try:
        _assert_tables_match_topics(client, await _read_routes(settings))
        _assert_plans_never_overlap(client)
    finally:
        client.close()
