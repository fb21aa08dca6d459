"""The runtime in memory, for tests and in-process benchmarks: it runs the topology's real declaration
(`streams.topology.wire`) without Faust or Kafka.

Topics are lists of `InputMessage` (bytes, one partition each), tables hold bytes (each state decoded once per stored
value, as the Faust runtime does), and every emit goes back on its topic, so the folds that read it see it on their
next step, while `published` keeps every emit in order. Like the Faust runtime it refuses an emit to a topic the
fold does not declare (`UndeclaredOutput`), before anything of the batch is published or stored. Timers run only when
told, `tick(now)`; `now` is the instant every batch is folded at. The sink records what reaches it (`written`), and
drives the real writer when the declaration hands it one (a chdb client given to `wire`).

It knows no fold by name: whatever `wire` declares is what runs.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.deadlines import DeadlineIndex
from core.folds import Fold
from core.settings import Settings
from schemas import DecodeError, Record
from schemas.codec import encode_record
from streams.batching import (
    BatchResult,
    DecodedStates,
    Emit,
    InputMessage,
    bounded_batch,
    bounded_tick,
    dead_letter,
    decode_keyed,
)
from streams.runtime.protocol import (
    BatchFn,
    PartitionWriter,
    SinkWriter,
    StatelessFn,
    TickFn,
    V,
    WakeFn,
    check_outputs,
    check_timer,
)


@dataclass
class _Reader:
    fold: Fold
    step: Callable[[list[InputMessage]], None]
    tick: Callable[[datetime], None] | None = None
    load: Callable[[str], Any] | None = None
    """A keyed fold's lookup of a key's state."""
    positions: dict[str, int] = field(default_factory=dict)
    """Per input topic, the offset of the next record to read."""


class MemoryRuntime:
    def __init__(self, settings: Settings, now: datetime) -> None:
        self.settings = settings
        self.now = now
        self.topics: dict[str, list[InputMessage]] = defaultdict(list)
        self.published: list[Emit] = []
        """Every record the folds emitted, in order."""
        self.tables: dict[str, dict[str, bytes]] = {}
        """Per keyed fold (by name), its table."""
        self.written: dict[str, list[InputMessage]] = defaultdict(list)
        """Per sink fold, the records it took, in the order it took them."""
        self._readers: list[_Reader] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- FoldRuntime -------------------------------------------------------------------------------------------------

    def keyed_fold(
        self,
        fold: Fold,
        decode_state: Callable[[bytes], Any],
        batch: BatchFn[Any],
        tick: TickFn[Any] | None = None,
        census: Callable[[Iterable[Any]], None] | None = None,
        wake: WakeFn[Any] | None = None,
    ) -> None:
        check_timer(fold, tick)
        table = self.tables[fold.name] = {}
        decoded: DecodedStates[str, Any] = DecodedStates(decode_state)
        deadlines: DeadlineIndex[str] = DeadlineIndex()

        def load(key: str) -> Any:
            raw = table.get(key)
            return None if raw is None else decoded.get(key, raw)

        def publish(bounded: tuple[BatchResult[Any], Any]) -> None:
            result, encoded = bounded
            self._publish(fold, result.emits)
            for raw_key, raw, state in encoded.states:
                key = raw_key.decode()
                table[key] = raw
                decoded.written(key, raw, state)
                if wake is not None:
                    deadlines.set(key, wake(state, None))

        def on_tick(now: datetime) -> None:
            assert tick is not None
            if wake is None:
                publish(bounded_tick(tick, [(key, load(key)) for key in table], now))
            else:
                due = [(key, load(key)) for key in deadlines.due(now)]
                result, encoded = bounded_tick(tick, due, now)
                publish((result, encoded))
                for key, state in due:  # unchanged: not before its next deadline
                    if key not in result.states:
                        deadlines.set(key, wake(state, now))
            if census is not None:
                census(load(key) for key in table)

        self._readers.append(
            _Reader(
                fold,
                lambda messages: publish(bounded_batch(batch, messages, load, self.now, self.settings.topic_prefix)),
                on_tick if tick else None,
                load,
            )
        )

    def stateless_fold(self, fold: Fold, batch: StatelessFn) -> None:
        self._readers.append(_Reader(fold, lambda messages: self._publish(fold, batch(messages, self.now))))

    def global_table(
        self, fold: Fold, decode: Callable[[bytes | None], V], key_of: Callable[[V], str]
    ) -> Callable[[str], V | None]:
        (topic,) = fold.inputs
        table = self.tables[topic] = {}
        mirror: dict[str, V] = {}

        def step(messages: list[InputMessage]) -> None:
            stored: dict[str, tuple[bytes, V]] = {}
            dead = []
            for message in messages:
                try:
                    key, value = decode_keyed(message, decode, key_of)
                except DecodeError as error:
                    dead.append(dead_letter(message, error.reason, error.detail, self.now, self.settings.topic_prefix))
                    continue
                assert message.value is not None  # a tombstone does not decode
                stored[key] = (message.value, value)
            self._publish(fold, dead)
            for key, (raw, value) in stored.items():
                table[key], mirror[key] = raw, value

        self._readers.append(_Reader(fold, step))
        return mirror.get

    def sink(self, fold: Fold, writer: SinkWriter | None) -> None:
        partitions: dict[str, PartitionWriter] = {}

        def step(messages: list[InputMessage]) -> None:
            self.written[fold.name] += messages
            if writer is not None:
                self._run(self._write(writer, partitions, messages))

        def flush_due(now: datetime) -> None:
            for partition in partitions.values():
                self._run(partition.flush_due())

        self._readers.append(_Reader(fold, step, flush_due if writer is not None else None))

    # -- driving -----------------------------------------------------------------------------------------------------

    @property
    def folds(self) -> list[Fold]:
        """What the declaration registered, in its order."""
        return [reader.fold for reader in self._readers]

    def produce(self, topic: str, key: str, value: Record | bytes | None, timestamp: datetime | None = None) -> None:
        """Append a record to `topic` (unprefixed), as a producer outside the topology would."""
        raw = value if value is None or isinstance(value, bytes) else encode_record(value)
        log = self.topics[topic]
        log.append(InputMessage(topic, 0, len(log), key.encode(), raw, timestamp))

    def pending(self) -> list[str]:
        """The folds with records waiting, by name, in declaration order."""
        waiting = (r for r in self._readers if any(r.positions.get(t, 0) < len(self.topics[t]) for t in r.fold.inputs))
        return [r.fold.name for r in waiting]

    def step(self, fold: str, size: int) -> None:
        """One batch of `fold`: up to `size` records of each of its inputs (Faust interleaves topics freely)."""
        (reader,) = (r for r in self._readers if r.fold.name == fold)
        messages, positions = [], dict(reader.positions)
        for topic in reader.fold.inputs:
            start = positions.get(topic, 0)
            taken = self.topics[topic][start : start + size]
            messages += taken
            positions[topic] = start + len(taken)
        reader.step(messages)
        reader.positions.update(positions)  # read again when the batch was refused

    def drain(self, size: int = 1_000) -> None:
        """Step the first fold with records waiting until none has any."""
        while pending := self.pending():
            self.step(pending[0], size)

    def tick(self, now: datetime) -> None:
        """Every timer at `now`, in declaration order (`now` is then the instant of the batches that follow)."""
        self.now = now
        for reader in self._readers:
            if reader.tick is not None:
                reader.tick(now)

    def state(self, fold: str, key: str) -> Any:
        """A keyed fold's state of `key` (None: none stored)."""
        (load,) = (r.load for r in self._readers if r.fold.name == fold and r.load is not None)
        return load(key)

    def records(self, topic: str) -> list[Record]:
        """What the folds published to `topic`, in order."""
        return [e.record for e in self.published if e.topic == topic]

    def latest(self, topic: str) -> dict[str, Record]:
        """The last record the folds published per key of `topic` (compacted-topic semantics)."""
        return {e.key: e.record for e in self.published if e.topic == topic}

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()

    def _publish(self, fold: Fold, emits: Iterable[Emit]) -> None:
        emits = list(emits)
        check_outputs(fold, emits)
        for emit in emits:
            self.produce(emit.topic, emit.key, emit.record)
        self.published += emits

    async def _write(
        self, writer: SinkWriter, partitions: dict[str, PartitionWriter], messages: list[InputMessage]
    ) -> None:
        for message in messages:
            partition = partitions.get(message.topic)
            if partition is None:
                partition = partitions[message.topic] = await writer.start(message.topic, 0, message.offset)
            if message.offset > partition.written_through:
                await partition.take(message)

    def _run(self, call: Any) -> None:
        """A sink writer's coroutine, on this runtime's own loop (the folds are synchronous)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(call)
