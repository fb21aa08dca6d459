"""The ClickHouse side of the sinks: a `SinkWriter` (streams/runtime/protocol.py) that the runtime's sink primitive
drives over every topic of `sinks.tables.ROUTES`, batched per partition and written effectively once. It knows
ClickHouse, not Faust: intake, acknowledgement and the position reported are the runtime's (streams/runtime/sink.py).

1. A partition starts from its committed offset and the ranges planned from there on (`sinks.batcher.resume`): ranges
   inserted whole count as written without writing, the others are rebuilt by the Batcher exactly as cut before,
   under the same tokens, which ClickHouse drops when they already landed.
2. A record counts as written once the flush covering it is (`write_flush` records the plan, then inserts).
3. ClickHouse failing: `write_flush` retries transient errors for ever, and any other error is logged and retried
   here with capped backoff. The writer waits, never drops, never crashes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TypeVar

from clickhouse_connect.driver.client import Client

from schemas import DecodeError
from sinks.batcher import Batcher, Flush, resume
from sinks.tables import Route
from sinks.writer import DEFAULT_BACKOFF, Backoff, planned_ranges, write_flush
from streams import metrics
from streams.batching import InputMessage

log = logging.getLogger(__name__)
T = TypeVar("T")


class ClickHouseWriter:
    """Writes the topics of `routes` (unprefixed names) into their tables; Kafka's names (with `prefix`) are what the
    plans and tokens record."""

    def __init__(
        self,
        client: Client,
        routes: Mapping[str, Route],
        prefix: str,
        max_rows: int,
        max_ms: int,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.client = client
        self.routes = routes
        self.prefix = prefix
        self.max_rows = max_rows
        self.max_ms = max_ms
        self.backoff = backoff

    async def start(self, topic: str, partition: int, committed: int) -> PartitionWriter:
        kafka_topic = self.prefix + topic
        planned = await self.until_done(
            lambda: asyncio.to_thread(planned_ranges, self.client, kafka_topic, partition, committed)
        )
        start = resume(planned, committed)
        route = self.routes[topic]
        batcher = Batcher(
            route, kafka_topic, partition, max_rows=self.max_rows, max_ms=self.max_ms, planned=start.replay
        )
        return PartitionWriter(self, route, batcher, start.written_through)

    async def until_done(self, call: Callable[[], Awaitable[T]]) -> T:
        """Retry `call` with capped backoff whatever it raises: a sink waits for ClickHouse, it never gives up."""
        delays = replace(self.backoff, attempts=None).delays()
        while True:
            try:
                return await call()
            except Exception:
                delay = next(delays)
                log.exception("ClickHouse sink: retrying in %.1f s", delay)
                await asyncio.sleep(delay)


class PartitionWriter:
    def __init__(self, sink: ClickHouseWriter, route: Route, batcher: Batcher, written_through: int) -> None:
        self.sink = sink
        self.route = route
        self.batcher = batcher
        self.written_through = written_through
        """Every offset up to here is in ClickHouse."""

    async def take(self, message: InputMessage) -> None:
        for flush in self.batcher.add(message.offset, self._decode(message)):
            await self._write(flush)

    async def flush_due(self) -> None:
        for flush in self.batcher.due():
            await self._write(flush)

    def _decode(self, message: InputMessage) -> object | None:
        try:
            return self.route.codec.decode(message.value)
        except DecodeError as error:
            # Our own outputs, or inputs the engine dead-letters itself: nothing to write, the offset still counts.
            log.info("%s[%d]@%d not written: %s", message.topic, message.partition, message.offset, error)
            return None

    async def _write(self, flush: Flush) -> None:
        if flush.batches:
            started = time.monotonic()
            client, backoff = self.sink.client, self.sink.backoff
            await self.sink.until_done(lambda: write_flush(client, flush, backoff=backoff))
            metrics.observe_flush(flush, time.monotonic() - started)
        self.written_through = flush.last_offset
