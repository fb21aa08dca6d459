"""Inserting batches: one insert per batch with its deduplication token, retried with capped backoff when transient.

The insert blocks (clickhouse-connect is synchronous, chdb runs in-process), so async callers go through
`write_flush`, which runs it in a worker thread and keeps the event loop serving Kafka heartbeats meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from sinks.batcher import Flush, dedup_token
from sinks.rows import TableSpec, columns

log = logging.getLogger(__name__)

SINK_BATCHES = TableSpec(
    "sink_batches",
    columns("topic", "partition", "first_offset", "last_offset", planned_at=lambda _: datetime.now(UTC)),
)
"""Offset ranges of the flushes, recorded before their inserts (the Kafka Connect sink's exactly-once recipe)."""

# ClickHouse error codes worth retrying: the server is busy, short of memory or parts, or the link failed.
TRANSIENT_CODES = frozenset(
    {
        3,  # UNEXPECTED_END_OF_FILE
        159,  # TIMEOUT_EXCEEDED
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        236,  # ABORTED
        241,  # MEMORY_LIMIT_EXCEEDED
        242,  # TABLE_IS_READ_ONLY
        252,  # TOO_MANY_PARTS
        319,  # UNKNOWN_STATUS_OF_INSERT
        425,  # SYSTEM_ERROR
    }
)


def is_transient(error: BaseException) -> bool:
    """Worth retrying: a connection/transport failure or a load-related server error (not bad SQL or data)."""
    if isinstance(error, OperationalError | OSError):
        return True
    return isinstance(error, DatabaseError) and getattr(error, "code", None) in TRANSIENT_CODES


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff. `attempts=None` retries for ever: a sink never drops a batch (issue 5)."""

    first_seconds: float = 0.2
    cap_seconds: float = 30.0
    factor: float = 2.0
    attempts: int | None = None

    def delays(self) -> Iterator[float]:
        """The wait before each retry (one fewer than the attempts)."""
        delay, retries = self.first_seconds, 0
        while self.attempts is None or retries < self.attempts - 1:
            yield min(delay, self.cap_seconds)
            delay *= self.factor
            retries += 1


DEFAULT_BACKOFF = Backoff()


def write_batch(
    client: Client,
    table: TableSpec,
    rows: Sequence[Sequence[Any]],
    token: str,
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Insert `rows` into `table` once: a repeat of the same token (a retry after an unseen success) is dropped."""
    delays = backoff.delays()
    while True:
        try:
            client.insert(
                table.name,
                rows,
                column_names=list(table.column_names),
                settings={"insert_deduplication_token": token},
            )
            return
        except Exception as error:
            delay = next(delays, None) if is_transient(error) else None
            if delay is None:
                raise
            log.warning("insert into %s failed (%s); retrying in %.1f s", table.name, error, delay)
            sleep(delay)


def record_plan(client: Client, flush: Flush, *, backoff: Backoff = DEFAULT_BACKOFF) -> None:
    """Remember the flush's offset range before inserting it, so a restart rebuilds the same batches."""
    token = dedup_token(SINK_BATCHES.name, flush.topic, flush.partition, flush.first_offset, flush.last_offset)
    write_batch(client, SINK_BATCHES, [SINK_BATCHES.row(flush, flush.last_offset)], token, backoff=backoff)


def planned_ranges(client: Client, topic: str, partition: int, from_offset: int) -> list[tuple[int, int]]:
    """Ranges planned for this partition that end at or after `from_offset` (the committed position)."""
    result = client.query(
        f"SELECT first_offset, last_offset FROM {SINK_BATCHES.name} FINAL"
        " WHERE topic = {topic:String} AND partition = {partition:UInt32} AND last_offset >= {offset:UInt64}"
        " ORDER BY first_offset",
        parameters={"topic": topic, "partition": partition, "offset": from_offset},
    )
    return [(int(first), int(last)) for first, last in result.result_rows]


async def write_flush(client: Client, flush: Flush, *, backoff: Backoff = DEFAULT_BACKOFF) -> None:
    """Plan, then insert every batch of a flush, off the event loop; ack `flush.last_offset` after this returns."""
    await asyncio.to_thread(_write_all, client, flush, backoff)


def _write_all(client: Client, flush: Flush, backoff: Backoff) -> None:
    record_plan(client, flush, backoff=backoff)
    for batch in flush.batches:
        write_batch(client, batch.table, batch.rows, batch.token, backoff=backoff)
