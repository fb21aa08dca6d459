"""The sink primitive in Faust terms: one agent over a fold's inputs, each partition's records handed in offset order
to a `SinkWriter` (the domain side: what to write, when, and how to resume), and a record acknowledged and its
position reported only once the writer has written it.

1. Intake is the keyed folds' (`OrderedIntake`): every message held by an extra reference, nothing taken during a
   rebalance, each partition's records admitted in offset order from the committed offset. Offsets are the writer's
   batch boundaries and tokens, so a record out of order or twice in a batch would change what a rebuild cuts.
2. A partition starts (on its first record of a consumer generation) from its committed offset: the writer resumes
   from there (`sinks.batcher.resume` for ClickHouse).
3. A record is acknowledged, and its position reported to the ledger (runtime/progress.py), once the writer's
   `written_through` covers it. A repeated delivery of an offset waits for the same write; a record ahead of a gap is
   released unacknowledged (the intake rewinds to the gap).
4. A rebalance or a new generation drops the pending records unacknowledged: the seek that ends it delivers them
   again, and the partition restarts from step 2.
5. The writer waits for its store (retrying), never drops, never crashes: consumption pauses behind the lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import faust
from faust.types import TP

from core.folds import Fold
from streams import metrics
from streams.runtime.intake import Host, OrderedIntake, release
from streams.runtime.protocol import PartitionWriter, SinkWriter
from streams.runtime.sequencer import Admit

log = logging.getLogger(__name__)

MIN_TICK_SECONDS = 0.2
TICK_STEPS = 2
"""Due batches are looked for this many times per `sink_batch_ms`: a batch waits at most half as long again."""


@dataclass
class _Partition:
    tp: TP
    writer: PartitionWriter
    held: list[faust.EventT] = field(default_factory=list)
    """Deliveries not acknowledged yet, in arrival order (a repeated offset included)."""


class Sink:
    """Registers the agent `fold.name` over the prefixed topics of `fold.inputs`, and its flush loop."""

    def __init__(self, runtime: Host, fold: Fold, writer: SinkWriter) -> None:
        app, settings = runtime.app, runtime.settings
        self.app = app
        self.runtime = runtime
        self.writer = writer
        self.lock = asyncio.Lock()
        self.intake = OrderedIntake(runtime, fold.name, [settings.topic(t) for t in fold.inputs], busy=self.lock.locked)
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

        app.agent(runtime.topic(*fold.inputs), name=fold.name)(agent)
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
        """Write due batches, and drop the pending ones as soon as Faust stops the flow (a rebalance or shutdown
        waits for every held record). Not a Faust timer: those stop before the shutdown's wait begins."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._tick()
            except Exception:
                log.exception("sink: tick failed")

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
                written_through = partition.writer.written_through
                await partition.writer.flush_due()
                if partition.writer.written_through != written_through:
                    await self._ack_written(partition)
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
            if partition is None or message.offset <= partition.writer.written_through:
                await self._ack(event)
            else:
                partition.held.append(event)  # acknowledged with the write of the first delivery
            return
        record = self.runtime.message(event)
        if partition is None:
            tp = message.tp
            writer = await self.writer.start(record.topic, tp.partition, self.intake.committed(tp) or 0)
            partition = self.partitions[tp] = _Partition(tp, writer)
        partition.held.append(event)
        written_through = partition.writer.written_through
        if message.offset > written_through:
            await partition.writer.take(record)
        if message.offset <= written_through or partition.writer.written_through != written_through:
            await self._ack_written(partition)  # only when something is newly written: held records are many

    async def _ack_written(self, partition: _Partition) -> None:
        written_through = partition.writer.written_through
        self.intake.report([partition.tp], lambda _: written_through + 1)
        pending = []
        for event in partition.held:
            if event.message.offset <= written_through:
                await self._ack(event)
            else:
                pending.append(event)
        partition.held = pending

    async def _ack(self, event: faust.EventT) -> None:
        assert self.stream is not None  # set before the first batch
        await self.stream.ack(event)

    def _drop_pending(self) -> None:
        """Release every held record unacknowledged: the seek after a rebalance, or the next start, delivers them
        again and their partition restarts from its committed offset."""
        for partition in self.partitions.values():
            for event in partition.held:
                release(self.app, event.message)
            partition.held.clear()
        self.partitions.clear()
        self.generation = None
