"""`ctxbudget status`: how far behind the worker group is, and what it holds.

The group is that of the roles in the settings (`CTXBUDGET_ROLES`, all by default: see `Settings.faust_app_id`).

- lag per partition of each topic the group reads: the group's committed offsets (the broker's own record,
  `OffsetFetch`) against the partitions' end offsets; the committed offset is the next record to process, so the
  last processed is one before;
- stale threads: the newest state of each thread on the compacted `thread-state` topic, read to its end;
- sink backlog: the group's lag on the topics the ClickHouse sinks read (records not yet written and committed); none
  for a group without the sinks role.

Reading Kafka is `collect`; `lag_rows`, `as_json` and `render` are pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from rich.console import Group
from rich.table import Table

from core.settings import Settings
from core.topics import THREAD_STATE
from sinks.tables import ROUTES

READ_TIMEOUT_MS = 1_000


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    """The group's committed offset (next to process); None when it never committed here."""
    end: int

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0)

    @property
    def last_processed(self) -> int | None:
        return self.committed - 1 if self.committed else None


@dataclass(frozen=True)
class StatusReport:
    group: str
    partitions: list[PartitionLag]
    threads: int
    stale_threads: int
    sink_backlog: int | None
    """None: the group does not run the sinks."""


def lag_rows(committed: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> list[PartitionLag]:
    """One row per partition of the consumed topics, sorted; a partition without a commit counts from offset 0."""
    return [
        PartitionLag(topic, partition, committed.get((topic, partition)), end)
        for (topic, partition), end in sorted(ends.items())
    ]


def sink_backlog(rows: Iterable[PartitionLag], sink_topics: Iterable[str]) -> int:
    wanted = set(sink_topics)
    return sum(row.lag for row in rows if row.topic in wanted)


def count_stale(latest: Mapping[bytes, bytes | None]) -> tuple[int, int]:
    """(threads, stale threads) among the newest `thread-state` values by key (a tombstone removes the thread)."""
    values = [orjson.loads(v) for v in latest.values() if v is not None]
    return len(values), sum(1 for v in values if v.get("stale"))


def as_json(report: StatusReport) -> str:
    body = asdict(report)
    body["partitions"] = [
        {**asdict(row), "lag": row.lag, "last_processed": row.last_processed} for row in report.partitions
    ]
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def render(report: StatusReport) -> Group:
    lag = Table("topic", "partition", "last processed", "end", "lag", title=f"consumer group {report.group}")
    for row in report.partitions:
        processed = "-" if row.last_processed is None else str(row.last_processed)
        lag.add_row(row.topic, str(row.partition), processed, str(row.end), str(row.lag))
    totals = Table("threads", "stale threads", "sink backlog", "total lag")
    total = sum(row.lag for row in report.partitions)
    backlog = "-" if report.sink_backlog is None else str(report.sink_backlog)
    totals.add_row(str(report.threads), str(report.stale_threads), backlog, str(total))
    return Group(lag, totals)


def consumed_topics(settings: Settings) -> set[str]:
    """The topics the group of `settings.roles` reads: its folds' inputs, from the topology's declaration."""
    from streams.topology import declared

    return {settings.topic(topic) for fold in declared(settings).folds for topic in fold.inputs}


# -- the broker ------------------------------------------------------------------------------------------------------
async def collect(settings: Settings) -> StatusReport:
    group = settings.faust_app_id
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        committed = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}
        read = consumed_topics(settings) & set(await admin.list_topics())
        topics = await admin.describe_topics(sorted(read | {topic for topic, _ in committed}))
    finally:
        await admin.close()
    tps = [TopicPartition(t["topic"], p["partition"]) for t in topics for p in t["partitions"]]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        ends = {(tp.topic, tp.partition): offset for tp, offset in (await consumer.end_offsets(tps)).items()}
        threads, stale = count_stale(await read_latest(consumer, settings.topic(THREAD_STATE), ends))
    finally:
        await consumer.stop()
    rows = lag_rows(committed, ends)
    backlog = sink_backlog(rows, (settings.topic(t) for t in ROUTES)) if "sinks" in settings.roles else None
    return StatusReport(group, rows, threads, stale, backlog)


async def read_latest(
    consumer: AIOKafkaConsumer, topic: str, ends: Mapping[tuple[str, int], int]
) -> dict[bytes, bytes | None]:
    """The newest value per key of a compacted topic, read from the beginning up to the end offsets given."""
    tps = [TopicPartition(t, p) for (t, p), end in ends.items() if t == topic and end > 0]
    latest: dict[bytes, bytes | None] = {}
    if not tps:
        return latest
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    remaining = {tp: ends[(tp.topic, tp.partition)] for tp in tps}
    while remaining:
        batches = await consumer.getmany(*remaining, timeout_ms=READ_TIMEOUT_MS)
        for tp, records in batches.items():
            for record in records:
                if record.key is not None:
                    latest[record.key] = record.value
            if records and records[-1].offset + 1 >= remaining[tp]:
                del remaining[tp]
        if not batches:
            for tp in list(remaining):
                if await consumer.position(tp) >= remaining[tp]:
                    del remaining[tp]  # the tail was compacted away
    return latest
