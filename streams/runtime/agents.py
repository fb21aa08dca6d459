"""The Faust wiring every stateful agent shares: a keyed fold over co-partitioned topics, its table and its timer.

One discipline, kept in one place so each fold `streams.topology.wire` declares is a single call (its inputs and
outputs are `core.folds`'; an emit to a topic its fold does not declare is refused, see `protocol.UndeclaredOutput`):

1. Records arrive in batches (`take_ahead`, which fills the next batch while this one is applied). Each message is
   held by one extra reference, because the batching acknowledges a batch in a `finally` even when the agent is
   cancelled mid-batch (rebalance, shutdown).
2. Nothing is applied while a rebalance is under way: the seek that ends it delivers those records again.
3. A `Sequencer` admits each partition's records in offset order from the committed offset (runtime/sequencer.py),
   and a timer rewinds a partition with a gap, or one that owes records and has stopped advancing (Faust drops
   fetched records in a few places without seeking back).
4. The pure batch function folds them. Its outputs are sent and confirmed by Kafka, then the changed states' changelog
   records, then the states are written to the table, and only then does the agent report its position to the commit
   (runtime/progress.py: the group commits, per partition, the lowest position of the agents reading it). A crash
   anywhere in between replays the batch: outputs repeat under the same ids, nothing is lost. (The other order could
   persist a state whose outputs never left; its replay would then emit nothing.)
5. An optional timer folds the states of the partitions this worker owns (staleness, expiries, retirement), under
   the same lock as the batches, since both read-modify-write the same states and publishing awaits Kafka. With a
   `wake` function it folds only the states whose next deadline has passed (core/deadlines.py), not all of them.

Tables are keyed like their input topics (same bytes, same partitioner), so each changelog record goes to the
partition that owns its key (`streams.runtime.produce`); that is what lets batches and timers write outside per-event
iteration.

Steps 1-3 are `OrderedIntake` (runtime/intake.py; its `run` adds step 4's order for the keyed folds, the stateless
folds and the global tables), shared with the sink primitive (runtime/sink.py), which holds records longer (until its
writer has written them) but owes the same: never report a record not written, write in offset order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import faust

from core.deadlines import DeadlineIndex
from core.folds import Fold
from core.health import FailingAgents
from core.settings import Settings
from core.topics import MESSAGE_SIZE_CONFIGS
from schemas import DecodeError
from streams import metrics
from streams.batching import (
    BatchResult,
    DecodedStates,
    Emit,
    Encoded,
    InputMessage,
    bounded,
    bounded_batch,
    bounded_tick,
    dead_letter,
    decode_keyed,
    output_too_large,
)
from streams.runtime import faust_fixes
from streams.runtime.intake import OrderedIntake
from streams.runtime.policy_table import MirroredTable
from streams.runtime.produce import partition_of, produce
from streams.runtime.protocol import (
    BatchFn,
    SinkWriter,
    StatelessFn,
    TickFn,
    V,
    WakeFn,
    check_outputs,
    check_timer,
)
from streams.runtime.sink import Sink

S = TypeVar("S")
RAW = {"key_type": bytes, "value_type": bytes}
"""Keys and values stay bytes (the app's serializers are raw); decoding and dead-lettering are ours."""


class Runtime:
    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.progress = faust_fixes.track_progress(app)
        self.failures = FailingAgents()
        self._partition_counts: dict[str, int] = {}

    def topic(self, *names: str) -> faust.TopicT:
        return self.app.topic(
            *(self.settings.topic(n) for n in names), partitions=self.settings.topic_partitions, **RAW
        )

    def message(self, event: faust.EventT) -> InputMessage:
        message = event.message
        return InputMessage(
            topic=message.topic.removeprefix(self.settings.topic_prefix),
            partition=message.partition,
            offset=message.offset,
            key=message.key,
            value=message.value,
            timestamp=datetime.fromtimestamp(message.timestamp, UTC) if message.timestamp else None,
        )

    async def emit(self, fold: Fold, emits: Sequence[Emit], encoded: Encoded[Any] | None = None) -> None:
        """`send` the records `fold` emitted, all of them only if every one goes to a topic it declares."""
        check_outputs(fold, emits)
        await self.send(emits, encoded)

    async def send(self, emits: Sequence[Emit], encoded: Encoded[Any] | None = None) -> None:
        """Send (`encoded`: as `Encoded.of` encoded them) and wait for Kafka's acknowledgement of each record (Faust's
        Topic.send futures resolved earlier than that here: a SIGKILL then lost outputs whose states were already
        written)."""
        metrics.observe_sent(emits)
        records = encoded.emits if encoded is not None else Encoded.of(BatchResult(emits=list(emits))).emits
        await self.produce((self.settings.topic(topic), key, value) for topic, key, value in records)

    async def produce(self, records: Iterable[tuple[str, bytes, bytes]]) -> None:
        """Send (topic, key, value) records, batched per partition, and wait until Kafka has acknowledged each."""
        await produce(self.app.producer._ensure_producer(), records, self._partition_counts)

    async def delivered(self) -> None:
        """Wait until every record handed to the producer (table changelogs included) is acknowledged by Kafka.
        Faust's own flush before committing offsets gives up on its buffer after 0.1 s."""
        buffer = self.app.producer.buffer
        while buffer.size:
            await buffer.flush()
        await self.app.producer.flush()

    def keyed_fold(
        self,
        fold: Fold,
        decode_state: Callable[[bytes], S],
        batch: BatchFn[S],
        tick: TickFn[S] | None = None,
        census: Callable[[Iterable[S]], None] | None = None,
        wake: WakeFn[S] | None = None,
    ) -> KeyedFold[S]:
        """Register the agent `fold.name` over `fold.inputs` (all keyed alike, same partition count), with its table
        (also `fold.name`) holding one state per key, and the timer `tick` when given (with `wake`, only over the
        states whose instant has come). Returns the fold, whose `load` reads a key's state."""
        check_timer(fold, tick)
        return KeyedFold(self, fold, decode_state, batch, tick, census, wake)

    def stateless_fold(self, fold: Fold, batch: StatelessFn) -> None:
        """Register the agent `fold.name` over `fold.inputs`, publishing what `batch` emits (no table), in the keyed
        folds' discipline: ordered intake, outputs confirmed by Kafka, then the position reported."""
        settings = self.settings
        intake = OrderedIntake(self, fold.name, [settings.topic(t) for t in fold.inputs], busy=lambda: False)

        async def apply(events: list[faust.EventT]) -> None:
            now = datetime.now(UTC)
            result, encoded = bounded(
                lambda messages, _: BatchResult(emits=list(batch(messages, now))),
                [self.message(event) for event in events],
                lambda _: None,
                lambda message, why, result: output_too_large(message, why, result, now, settings.topic_prefix),
            )
            await self.emit(fold, result.emits, encoded)
            metrics.observe_outcomes(result.outcomes)

        async def agent(stream: faust.StreamT) -> None:
            async for events in intake.batches(stream, settings.batch_size, settings.batch_seconds):
                await intake.run(stream, events, apply)

        self.app.agent(self.topic(*fold.inputs), name=fold.name)(agent)

    def global_table(
        self, fold: Fold, decode: Callable[[bytes | None], V], key_of: Callable[[V], str]
    ) -> Callable[[str], V | None]:
        """A global table named after `fold.name`'s input, fed by the agent `fold.name` and by its changelog (the
        records other workers store), mirrored decoded in a plain map: the returned lookup is that map's `get`.

        The agent is a reader of its input like any other (the sinks read `policies` too): the group commits a
        partition only once both are past a record (runtime/progress.py), so a record the table never applied is
        read again instead of committed past on another reader's word."""
        settings = self.settings
        (topic,) = fold.inputs
        table = MirroredTable.register(
            self.app, topic, settings.topic_partitions, decode, extra_topic_configs=MESSAGE_SIZE_CONFIGS, **RAW
        )
        intake = OrderedIntake(self, fold.name, [settings.topic(topic)], busy=lambda: False)
        prefix = settings.topic_prefix

        async def apply(events: list[faust.EventT]) -> None:
            valid: dict[bytes, bytes] = {}
            dead: list[Emit] = []
            for event in events:
                message = self.message(event)
                try:
                    key, _ = decode_keyed(message, decode, key_of)
                except DecodeError as error:
                    dead.append(dead_letter(message, error.reason, error.detail, datetime.now(UTC), prefix))
                    continue
                assert message.value is not None  # a tombstone does not decode
                valid[key.encode()] = message.value
            await self.emit(fold, dead)
            # The table's store changes once its changelog records are in Kafka (as for the keyed folds' tables).
            changelog = table.changelog_topic.get_topic_name()
            await self.produce((changelog, key, value) for key, value in valid.items())
            for key, value in valid.items():
                table.put(key, value)

        async def agent(stream: faust.StreamT) -> None:
            async for events in intake.batches(stream, settings.batch_size, settings.batch_seconds):
                await intake.run(stream, events, apply)

        self.app.agent(self.topic(topic), name=fold.name)(agent)
        return table.mirror.get

    def sink(self, fold: Fold, writer: SinkWriter | None) -> None:
        if writer is not None:
            Sink(self, fold, writer)


class KeyedFold(Generic[S]):
    def __init__(
        self,
        runtime: Runtime,
        fold: Fold,
        decode_state: Callable[[bytes], S],
        batch: BatchFn[S],
        tick: TickFn[S] | None,
        census: Callable[[Iterable[S]], None] | None = None,
        wake: WakeFn[S] | None = None,
    ) -> None:
        app, settings = runtime.app, runtime.settings
        name, inputs = fold.name, fold.inputs
        self.runtime = runtime
        self.fold = fold
        self.table = app.Table(
            name,
            partitions=settings.topic_partitions,
            use_partitioner=True,
            default=None,
            extra_topic_configs=MESSAGE_SIZE_CONFIGS,
            **RAW,
        )
        self.lock = asyncio.Lock()
        topics = [settings.topic(n) for n in inputs]
        self.intake = OrderedIntake(runtime, name, topics, busy=self.lock.locked)
        self.owner_topic = topics[0]
        self.name = name
        self.census = census
        self._decoded: DecodedStates[bytes, S] = DecodedStates(decode_state)
        self._decoded_generation: int | None = None
        self.wake = wake
        self._deadlines: DeadlineIndex[bytes] = DeadlineIndex()
        self._owned_states: dict[bytes, S] = {}
        """With `wake`: every state this worker owns, as of `_indexed_generation` (the census counts them)."""
        self._indexed_generation: int | None = None

        async def agent(stream: faust.StreamT) -> None:
            async for events in self.intake.batches(stream, settings.batch_size, settings.batch_seconds):
                await self._on_batch(stream, events, batch)

        app.agent(runtime.topic(*inputs), name=name)(agent)
        if tick is not None:

            async def timer() -> None:
                await self._on_tick(tick)

            app.timer(settings.tick_seconds, name=f"{name}_tick")(timer)

    def load(self, key: str) -> S | None:
        raw_key = key.encode()
        raw = self.table.get(raw_key)
        return self._decode(raw_key, raw) if raw is not None else None

    def _decode(self, key: bytes, raw: bytes) -> S:
        generation = self.runtime.app.consumer_generation_id
        if generation != self._decoded_generation:  # partitions may have moved: let go of states not owned now
            self._decoded.clear()
            self._decoded_generation = generation
        return self._decoded.get(key, raw)

    async def _on_batch(self, stream: faust.StreamT, events: Sequence[faust.EventT], batch: BatchFn[S]) -> None:
        async def apply(applied: list[faust.EventT]) -> None:
            async with self.lock:
                messages = [self.runtime.message(event) for event in applied]
                prefix = self.runtime.settings.topic_prefix
                result, encoded = bounded_batch(batch, messages, self.load, datetime.now(UTC), prefix)
                await self._publish(result, encoded)
            metrics.observe_batch(self.name, [event.message for event in applied])
            metrics.observe_outcomes(result.outcomes)

        await self.intake.run(stream, events, apply)

    async def _on_tick(self, tick: TickFn[S]) -> None:
        app = self.runtime.app
        if app.rebalancing:
            return
        async with self.lock:
            if not app.rebalancing:
                now = datetime.now(UTC)
                if self.wake is None:
                    owned = list(self._owned())
                    result, encoded = bounded_tick(tick, owned, now)
                    await self._publish(result, encoded)
                    states: Iterable[S] = (state for _, state in owned)
                else:
                    due = self._due(now)
                    result, encoded = bounded_tick(tick, [(key.decode(), state) for key, state in due], now)
                    await self._publish(result, encoded)
                    for key, state in due:  # unchanged: not before its next deadline
                        if key.decode() not in result.states:
                            self._deadlines.set(key, self.wake(state, now))
                    states = self._owned_states.values()
                if self.census is not None:
                    self.census(states)
                metrics.observe_outcomes(result.outcomes)

    async def _publish(self, result: BatchResult[S], encoded: Encoded[S]) -> None:
        await self.runtime.emit(self.fold, result.emits, encoded)
        # The changelog records are ours, batched like the outputs; the table's store is written once they are in
        # Kafka (a Faust table write would send each one on its own, and change the store before it is confirmed).
        changelog = self.table.changelog_topic.get_topic_name()
        await self.runtime.produce((changelog, raw_key, raw) for raw_key, raw, _ in encoded.states)
        for raw_key, raw, state in encoded.states:
            self.table.data[raw_key] = raw
            self._decoded.written(raw_key, raw, state)
            if self.wake is not None:
                self._owned_states[raw_key] = state
                self._deadlines.set(raw_key, self.wake(state, None))

    def _due(self, now: datetime) -> list[tuple[bytes, S]]:
        """The owned states whose next deadline has passed. The index is rebuilt from the table (one walk) whenever the
        partitions may have moved: the table's recovery writes its store without passing through `_publish`."""
        generation = self.runtime.app.consumer_generation_id
        if generation != self._indexed_generation:
            assert self.wake is not None
            self._deadlines.clear()
            self._owned_states = {key.encode(): state for key, state in self._owned()}
            for key, state in self._owned_states.items():
                self._deadlines.set(key, self.wake(state, None))
            self._indexed_generation = generation
        return [(key, self._owned_states[key]) for key in self._deadlines.due(now)]

    def _owned(self) -> Iterator[tuple[str, S]]:
        """States of the keys whose input partitions this worker actively owns (not standby copies)."""
        app, partitions = self.runtime.app, self.runtime.settings.topic_partitions
        owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == self.owner_topic}
        for key, raw in list(self.table.items()):
            if raw is not None and partition_of(key, partitions) in owned:
                yield key.decode(), self._decode(key, raw)
