"""The ClickHouse sinks in Faust terms: one agent over every topic of `sinks.tables.ROUTES`, batched per partition,
written effectively once, and a record acknowledged only once ClickHouse holds it.

The ClickHouse side is in `sinks/` (batches, tokens, planned ranges, inserts); this module owns the delivery:

1. Intake is the keyed folds' (`streams.runtime.OrderedIntake`): every message held by an extra reference, nothing
   taken during a rebalance, each partition's records admitted in offset order from the committed offset. Offsets
   are batch boundaries and tokens, so a record out of order or twice in a batch would change what a rebuild cuts.
2. A partition starts (on its first record of a consumer generation) from its committed offset and the ranges
   planned from there on (`sinks.batcher.resume`): ranges inserted whole are acknowledged without writing, the
   others are rebuilt by the Batcher exactly as cut before, under the same tokens, which ClickHouse drops when they
   already landed.
3. A record is acknowledged once the flush covering it is written (`write_flush` records the plan, then inserts).
   A repeated delivery of an offset waits for the same flush; a record ahead of a gap is released unacknowledged
   (the intake rewinds to the gap).
4. A rebalance or a new generation drops the pending batches unacknowledged: the seek that ends it delivers them
   again, and the partition restarts from step 2.
5. ClickHouse failing: `write_flush` retries transient errors for ever, and any other error is logged and retried
   here with capped backoff. The agent waits (consumption pauses behind the lock), never drops, never crashes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import faust
from clickhouse_connect.driver.client import Client
from faust.types import TP

from schemas import DecodeError
from sinks.batcher import Batcher, Flush, resume
from sinks.tables import ROUTES, Route
from sinks.writer import DEFAULT_BACKOFF, Backoff, planned_ranges, write_flush
from streams import metrics
from streams.runtime.agents import OrderedIntake, Runtime, release
from streams.runtime.sequencer import Admit

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_TICK_SECONDS = 0.2
TICK_STEPS = 2
"""Due batches are looked for this many times per `sink_batch_ms`: a batch waits at most half as long again."""


@dataclass
class _Partition:
    tp: TP
    batcher: Batcher
    written_through: int
    """Every offset up to here is in ClickHouse."""
    held: list[faust.EventT] = field(default_factory=list)
    """Deliveries not acknowledged yet, in arrival order (a repeated offset included)."""


class ClickHouseSink:
    """Registers the agent `name` over the prefixed topics of `routes`, and its flush timer."""

    def __init__(
        self,
        runtime: Runtime,
        client: Client,
        name: str = "clickhouse_sink",
        routes: Mapping[str, Route] = ROUTES,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        app, settings = runtime.app, runtime.settings
        self.app = app
        self.client = client
        self.backoff = backoff
        self.max_rows = settings.sink_batch_rows
        self.max_ms = settings.sink_batch_ms
        self.routes = {settings.topic(topic): route for topic, route in routes.items()}
        self.lock = asyncio.Lock()
        self.intake = OrderedIntake(runtime, name, list(self.routes), busy=self.lock.locked)
        self.partitions: dict[TP, _Partition] = {}
        self.generation: int | None = None
        self.stream: faust.StreamT | None = None

        async def agent(stream: faust.StreamT) -> None:
            self.stream = stream
            ticker = asyncio.ensure_future(self._tick_forever())
            try:
                async for events in self.intake.batches(stream, settings.sink_batch_rows, settings.batch_seconds):
                    await self._on_batch(events)
            finally:
                ticker.cancel()
                self._drop_pending()

        app.agent(runtime.topic(*routes), name=name)(agent)
        self.interval = max(MIN_TICK_SECONDS, settings.sink_batch_ms / 1000 / TICK_STEPS)

    async def _on_batch(self, events: Sequence[faust.EventT]) -> None:
        self.intake.hold(events)
        async with self.lock:
            verdicts = await self.intake.admit(events)
            if verdicts is None:
                return
            if self.intake.generation != self.generation:
                self._drop_pending()
                self.generation = self.intake.generation
            for index, (event, verdict) in enumerate(verdicts):
                if self.generation is None:  # dropped while this batch awaited a write
                    for later, _ in verdicts[index:]:
                        release(self.app, later.message)
                    return
                await self._take(event, verdict)

    async def _tick_forever(self) -> None:
        """Flush due batches, and drop the pending ones as soon as Faust stops the flow (a rebalance or shutdown
        waits for every held record). Not a Faust timer: those stop before the shutdown's wait begins."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._tick()
            except Exception:
                log.exception("ClickHouse sink: tick failed")

    async def _tick(self) -> None:
        if self._flow_stopped():
            if self.partitions or self.generation is not None:
                self._drop_pending()  # no lock: a write in flight may take long; its acks become no-ops
                self.intake.forget()
            return
        async with self.lock:
            if self._flow_stopped():
                return
            for partition in list(self.partitions.values()):
                for flush in partition.batcher.due():
                    await self._write(partition, flush)
            metrics.observe_sink_pending(Counter(tp.topic for tp, p in self.partitions.items() for _ in p.held))

    def _flow_stopped(self) -> bool:
        app = self.app
        stopped = app.rebalancing or not app.flow_control.is_active()
        return stopped or app.consumer_generation_id != self.generation

    async def _take(self, event: faust.EventT, verdict: Admit) -> None:
        message = event.message
        if verdict is Admit.AHEAD:
            release(self.app, message)
            return
        partition = self.partitions.get(message.tp)
        if verdict is Admit.DUPLICATE:
            # below the committed offset when the partition has not started in this generation
            if partition is None or message.offset <= partition.written_through:
                await self._ack(event)
            else:
                partition.held.append(event)  # acknowledged with the flush that writes the first delivery
            return
        if partition is None:
            partition = self.partitions[message.tp] = await self._start(message.tp)
        partition.held.append(event)
        if message.offset <= partition.written_through:
            await self._ack_written(partition)
            return
        for flush in partition.batcher.add(message.offset, self._decode(message)):
            await self._write(partition, flush)

    async def _start(self, tp: TP) -> _Partition:
        committed = self.intake.committed(tp) or 0
        planned = await self._until_done(
            lambda: asyncio.to_thread(planned_ranges, self.client, tp.topic, tp.partition, committed)
        )
        start = resume(planned, committed)
        route = self.routes[tp.topic]
        batcher = Batcher(
            route, tp.topic, tp.partition, max_rows=self.max_rows, max_ms=self.max_ms, planned=start.replay
        )
        return _Partition(tp, batcher, start.written_through)

    def _decode(self, message: faust.types.Message) -> object | None:
        try:
            return self.routes[message.topic].codec.decode(message.value)
        except DecodeError as error:
            # Our own outputs, or inputs the engine dead-letters itself: nothing to write, the offset still counts.
            log.info("%s[%d]@%d not written: %s", message.topic, message.partition, message.offset, error)
            return None

    async def _write(self, partition: _Partition, flush: Flush) -> None:
        if flush.batches:
            started = time.monotonic()
            await self._until_done(lambda: write_flush(self.client, flush, backoff=self.backoff))
            metrics.observe_flush(flush, time.monotonic() - started)
        partition.written_through = flush.last_offset
        await self._ack_written(partition)

    async def _ack_written(self, partition: _Partition) -> None:
        self.intake.report([partition.tp], lambda _: partition.written_through + 1)
        pending = []
        for event in partition.held:
            if event.message.offset <= partition.written_through:
                await self._ack(event)
            else:
                pending.append(event)
        partition.held = pending

    async def _ack(self, event: faust.EventT) -> None:
        assert self.stream is not None  # set before the first batch
        await self.stream.ack(event)

    def _drop_pending(self) -> None:
        """Release every held record unacknowledged: the seek after a rebalance, or the next start, delivers them
        again and their partition restarts from its committed offset and plan."""
        for partition in self.partitions.values():
            for event in partition.held:
                release(self.app, event.message)
            partition.held.clear()
        self.partitions.clear()
        self.generation = None

    async def _until_done(self, call: Callable[[], Awaitable[T]]) -> T:
        """Retry `call` with capped backoff whatever it raises: a sink waits for ClickHouse, it never gives up."""
        delays = replace(self.backoff, attempts=None).delays()
        while True:
            try:
                return await call()
            except Exception:
                delay = next(delays)
                log.exception("ClickHouse sink: retrying in %.1f s", delay)
                await asyncio.sleep(delay)
