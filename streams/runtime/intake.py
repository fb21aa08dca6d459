"""Steps 1-3 of the discipline every agent follows (`streams.runtime.agents`), shared by the folds and the sink
(`streams.runtime.sink`): hold every message of a batch, take none during a rebalance, admit each partition's records
in offset order from the committed offset, and rewind a partition with a gap or a stall.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.types import TP

from core.health import FailingAgents
from core.settings import Settings
from core.topics import compacted_topics
from streams import metrics
from streams.batching import InputMessage
from streams.runtime.progress import Progress
from streams.runtime.sequencer import Admit, Sequencer, Survey
from streams.runtime.take_ahead import take_ahead

SURVEY_RECORDS = 5000
"""The most records one survey of a compacted partition reads (its holes are then known without another)."""
WATCH_SECONDS = 1.0
"""How often each agent's partitions are checked for gaps and stalls when no record arrives to trigger it."""


class Host(Protocol):
    """What an agent's intake needs of its runtime (`streams.runtime.agents.Runtime`)."""

    app: faust.App
    settings: Settings
    progress: Progress[TP]
    failures: FailingAgents

    def topic(self, *names: str) -> faust.TopicT: ...

    def message(self, event: faust.EventT) -> InputMessage: ...


class OrderedIntake:
    """Steps 1-3 for the agent `name` over `topics`: hold every message of a batch, let none through during a
    rebalance, and sequence the rest per partition. The caller acknowledges (`stream.ack`) or `release`s each held
    message exactly once. A timer rewinds partitions with a gap or a stall even when no record arrives, unless
    `busy`."""

    def __init__(self, runtime: Host, name: str, topics: Collection[str], busy: Callable[[], bool]) -> None:
        app = self.app = runtime.app
        self.name = name
        self.topics = frozenset(topics)
        self.progress = runtime.progress
        self.progress.register(name, self.topics)
        self.failures = runtime.failures
        self.bootstrap_servers = str(runtime.settings.kafka_bootstrap_servers)
        compacted = compacted_topics(runtime.settings)
        self.sequencer: Sequencer[TP] = Sequencer(committed=self.committed, compacted=lambda tp: tp.topic in compacted)

        @app.timer(WATCH_SECONDS, name=f"{name}_watch")
        async def watch() -> None:
            # A busy agent (a batch in progress, a sink waiting for ClickHouse) is not stalled.
            if not app.rebalancing and app.flow_control.is_active() and not busy():
                self.sequencer.start(app.consumer_generation_id)
                await self.rewind()

    def committed(self, tp: TP) -> int | None:
        """The partition's committed offset (the next one to apply), None before the first commit."""
        return self.app.consumer._committed_offset.get(tp)

    @property
    def generation(self) -> int | None:
        """The consumer generation the last admitted batch belongs to."""
        return self.sequencer.generation

    def batches(self, stream: faust.StreamT, max_: int, within: float) -> AsyncIterator[list[faust.EventT]]:
        """The stream in batches of at most `max_` events, filling while the previous one is applied."""
        return take_ahead(stream, max_, within, lambda event: release(self.app, event.message))

    def hold(self, events: Sequence[faust.EventT]) -> None:
        """Take the extra reference before anything awaits: `take_ahead` acknowledges in a `finally`."""
        for event in events:
            event.message.incref()

    async def admit(self, events: Sequence[faust.EventT]) -> list[tuple[faust.EventT, Admit]] | None:
        """Each held event with the sequencer's verdict; None (and every message released) during a rebalance."""
        app = self.app
        if app.rebalancing:
            for event in events:  # the seek that ends the rebalance delivers them again
                release(app, event.message)
            return None
        self.sequencer.start(app.consumer_generation_id)
        verdicts = [(event, self.sequencer.admit(event.message.tp, event.message.offset)) for event in events]
        metrics.observe_sequenced(self.name, (verdict.value for _, verdict in verdicts))
        await self.rewind()
        return verdicts

    async def run(
        self,
        stream: faust.StreamT,
        events: Sequence[faust.EventT],
        apply: Callable[[list[faust.EventT]], Awaitable[None]],
    ) -> None:
        """One batch through steps 1-4: hold, admit in order, `apply` what is admitted (it returns once its effects
        are in Kafka), report the position, then acknowledge (or release what is ahead of a gap)."""
        self.hold(events)
        settled = 0
        try:
            verdicts = await self.admit(events)
            if verdicts is None:
                return
            try:
                await apply([event for event, verdict in verdicts if verdict is Admit.APPLY])
            except Exception as error:
                self.failures.failed(self.name, error)
                raise
            self.failures.applied(self.name)
            self.report({event.message.tp for event, _ in verdicts})
            for event, verdict in verdicts:
                if verdict is Admit.AHEAD:
                    release(self.app, event.message)
                else:
                    await stream.ack(event)
                settled += 1
        finally:
            if settled < len(events):
                # Cancelled (Faust restarts agents around rebalances) or failed before every record was settled:
                # let go of the rest unacknowledged, or a rebalance would wait for them for ever (wait_empty), and
                # start again from the committed offsets: the sequencer had already admitted what was not applied.
                for event in events[settled:]:
                    release(self.app, event.message)
                self.forget()

    def report(self, partitions: Iterable[TP], done: Callable[[TP], int] | None = None) -> None:
        """Tell the commit that this agent has applied every record of `partitions` below `done(tp)` (by default
        the next offset the sequencer expects: everything it admitted was published)."""
        done = done or self.sequencer.expected
        for tp in partitions:
            self.progress.done(self.name, self.sequencer.generation, tp, done(tp))

    def forget(self) -> None:
        """Start again from the committed offsets with the next batch (a caller dropped records it had admitted)."""
        self.sequencer.generation = None

    async def rewind(self) -> None:
        """Seek the owned partitions with a gap or a stall back to the first offset they owe (after surveying the
        compacted ones with a gap)."""
        consumer = self.app.consumer
        assigned = consumer.assignment()
        surveys = {tp: span for tp, span in self.sequencer.surveys_due().items() if tp in assigned}
        if surveys:
            for tp, survey in (await survey_offsets(self.bootstrap_servers, surveys)).items():
                self.sequencer.surveyed(tp, survey)
        now = time.monotonic()
        gaps = {tp: offset for tp, offset in self.sequencer.rewinds(now).items() if tp in assigned}
        ends = {tp: consumer.highwater(tp) for tp in self.app.assignor.assigned_actives() if tp.topic in self.topics}
        stalls = self.sequencer.stalls(now, {tp: end for tp, end in ends.items() if tp in assigned and end})
        metrics.observe_rewinds(self.name, gaps=len(gaps), stalls=len(stalls))
        due = {**gaps, **stalls}
        if due:
            # In the consumer's own thread: aiokafka is not thread-safe, and `Consumer.seek` calls it from this one
            # (a seek racing the fetcher crashed it with a KeyError in `fetched_records`).
            await consumer.seek_wait(due)


async def survey_offsets(bootstrap_servers: str, spans: Mapping[TP, tuple[int, int]]) -> dict[TP, Survey]:
    """Which offsets exist in each partition from `first` on, read past `until` or `SURVEY_RECORDS` records, whichever
    comes first (a consumer of its own, outside the group: Faust's fetch position is not to be touched)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        surveys: dict[TP, Survey] = {}
        for tp, (first, until) in spans.items():
            partition = TopicPartition(tp.topic, tp.partition)
            consumer.assign([partition])
            end = (await consumer.end_offsets([partition]))[partition]
            consumer.seek(partition, first)
            offsets: list[int] = []
            while (not offsets or offsets[-1] < min(until, end - 1)) and len(offsets) < SURVEY_RECORDS:
                fetched = (await consumer.getmany(partition, timeout_ms=1000)).get(partition, [])
                if not fetched:
                    break
                offsets.extend(record.offset for record in fetched)
            if offsets:
                surveys[tp] = Survey(first, offsets[-1], tuple(offsets))
        return surveys
    finally:
        await consumer.stop()


def release(app: faust.App, message: faust.types.Message) -> None:
    """Let go of a record without acknowledging it, so that a rebalance does not wait for it (`Consumer.wait_empty`
    waits for every tracked record that is not acknowledged). What commits is the agents' reported progress, which
    stays below it; a later delivery of the same offset is what gets applied."""
    message.acked = True  # the later ack of this delivery (take_ahead's `finally`) is then a no-op
    app.consumer._unacked_messages.discard(message)
