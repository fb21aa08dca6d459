"""Server-sent events (spec 6.4): one shared reader of `client-events` fanned out to bounded per-client queues.

The reader decodes each record once and offers it to every subscriber whose caller may see its project; a subscriber
whose queue is full is dropped (its stream ends, the client reconnects with Last-Event-ID and catches up from Kafka),
so a slow client never holds the reader or the others back. A resuming client is first sent what it missed from a
reader of its own, which stops where the shared reader stood when the client subscribed, then the live queue: no gap,
no repeat (see `api.event_ids`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, replace

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from api.event_ids import encode_event_id, resume_positions
from api.responses import utc_json
from api.tokens import Principal
from api.topic_reader import current_positions, open_reader, topic_partitions
from schemas import CLIENT_EVENT_ADAPTER, Codec, DecodeError

log = logging.getLogger(__name__)

CLIENT_EVENT_CODEC = Codec(CLIENT_EVENT_ADAPTER)
RETRY_MILLISECONDS = 2_000
"""The reconnect delay the stream asks browsers for (SSE `retry:`)."""


@dataclass(frozen=True)
class Delivery:
    """One client event, decoded and encoded once for every subscriber: `body` is its frame without the `id:` line,
    `frame` the whole frame with the id of `after` (the shared reader's positions once past it), which every client
    sent all it may see up to this event shares."""

    partition: int
    offset: int
    project_id: str
    body: bytes
    after: Mapping[int, int] | None = None
    frame: bytes = b""


def to_delivery(record: ConsumerRecord) -> Delivery | None:
    """The record as an SSE payload, or None when it is not a valid client event (it is then skipped)."""
    try:
        event = CLIENT_EVENT_CODEC.decode(record.value)
    except DecodeError as error:
        log.warning("skipping invalid client event at %s:%s: %s", record.partition, record.offset, error)
        return None
    body = b"event: %s\ndata: %s\n\n" % (event.event_type.value.encode(), utc_json(event))
    return Delivery(record.partition, record.offset, event.project_id, body)


class Signal(enum.Enum):
    END = "end"
    """Wakes a waiting stream to end it."""
    HEARTBEAT = "heartbeat"
    """The stream has written nothing for a heartbeat period."""


class Subscription:
    def __init__(self, principal: Principal, queue_size: int) -> None:
        self.principal = principal
        self.queue: asyncio.Queue[Delivery | Signal] = asyncio.Queue(queue_size)
        """Deliveries in order, and signals."""
        self.dropped = asyncio.Event()
        self.written_at = 0.0
        """The loop's time of the stream's last write."""
        self._heartbeat: asyncio.TimerHandle | None = None

    def end(self) -> None:
        """End the stream now (the server is stopping): the client reconnects with Last-Event-ID."""
        self.dropped.set()
        with contextlib.suppress(asyncio.QueueFull):  # a full queue has no stream waiting on it
            self.queue.put_nowait(Signal.END)

    def offer(self, delivery: Delivery) -> None:
        if self.dropped.is_set() or not self.principal.sees(delivery.project_id):
            return
        try:
            self.queue.put_nowait(delivery)
        except asyncio.QueueFull:
            self.dropped.set()

    def keep_alive(self, seconds: float) -> None:
        """Queue a heartbeat whenever the stream has written nothing for `seconds`, until `stop_heartbeats`. One timer
        per quiet period: a timeout around every wait armed and cancelled a timer per event and client, the largest
        cost of a fan-out to many clients."""
        loop = asyncio.get_running_loop()
        quiet = loop.time() - self.written_at
        if quiet >= seconds:
            with contextlib.suppress(asyncio.QueueFull):  # a full queue is a stream with plenty to write
                self.queue.put_nowait(Signal.HEARTBEAT)
            quiet = 0.0
        self._heartbeat = loop.call_later(seconds - quiet, self.keep_alive, seconds)

    def stop_heartbeats(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()


class Broadcaster:
    """The shared live reader. `positions` is where it stands: the next offset it will fan out, per partition."""

    def __init__(self, bootstrap_servers: str, topic: str, queue_size: int) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.queue_size = queue_size
        self.positions: dict[int, int] = {}
        self._subscribers: set[Subscription] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        partitions = await topic_partitions(self.bootstrap_servers, self.topic)
        self._consumer = await open_reader(self.bootstrap_servers, self.topic, partitions, from_start=False)
        self.positions = await current_positions(self._consumer)
        self._task = asyncio.create_task(self._run(self._consumer), name="sse-broadcaster")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def subscribe(self, principal: Principal) -> tuple[Subscription, dict[int, int]]:
        """A new subscription and the positions from which its queue receives every event (no await in between)."""
        subscription = Subscription(principal, self.queue_size)
        self._subscribers.add(subscription)
        return subscription, dict(self.positions)

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    def end_streams(self) -> None:
        """End every open stream: they never end on their own, and would hold a server's shutdown."""
        for subscription in list(self._subscribers):
            subscription.end()

    def fan_out(self, records: Iterable[ConsumerRecord]) -> None:
        """Offer records to every subscriber and advance `positions`, synchronously, so a subscribe sees either all
        of a record's effects or none."""
        for record in records:
            self.positions[record.partition] = record.offset + 1
            delivery = to_delivery(record)
            if delivery is not None:
                after = dict(self.positions)
                shared = replace(delivery, after=after, frame=frame(delivery, encode_event_id(after)))
                for subscription in self._subscribers:
                    subscription.offer(shared)

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=1_000)
            for records in batches.values():
                self.fan_out(records)

    async def missed(self, last_seen: Mapping[int, int], live: Mapping[int, int]) -> AsyncIterator[Delivery]:
        """Every event after `last_seen` and before `live`, per partition in order, from a reader of its own."""
        start = resume_positions(last_seen, live)
        if all(start[p] >= live[p] for p in live):
            return
        consumer = await open_reader(self.bootstrap_servers, self.topic, live.keys(), from_start=False, positions=start)
        try:
            while any(position < live[p] for p, position in (await current_positions(consumer)).items()):
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for record in records:
                        if record.offset < live[record.partition]:
                            delivery = to_delivery(record)
                            if delivery is not None:
                                yield delivery
        finally:
            await consumer.stop()


def frame(delivery: Delivery, event_id: str) -> bytes:
    return b"id: %s\n%s" % (event_id.encode(), delivery.body)


def heartbeat(event_id: str) -> bytes:
    """A comment that keeps proxies from closing an idle stream, with the id so far."""
    return b": heartbeat\nid: %s\n\n" % event_id.encode()


async def event_stream(
    broadcaster: Broadcaster, principal: Principal, last_seen: Mapping[int, int] | None, heartbeat_seconds: float
) -> AsyncIterator[bytes]:
    """The SSE body for one client: what it missed (when resuming), then live events it may see, with heartbeats."""
    subscription, live = broadcaster.subscribe(principal)
    try:
        sent = dict(live) if last_seen is None else resume_positions(last_seen, live)
        yield b"retry: %d\n" % RETRY_MILLISECONDS + heartbeat(encode_event_id(sent))
        if last_seen is not None:
            async for delivery in broadcaster.missed(last_seen, live):
                if principal.sees(delivery.project_id):
                    sent[delivery.partition] = delivery.offset + 1
                    yield frame(delivery, encode_event_id(sent))
            sent = dict(live)  # everything below `live` was read: sent, or not this client's
        loop = asyncio.get_running_loop()
        subscription.written_at = loop.time()
        subscription.keep_alive(heartbeat_seconds)
        while not subscription.dropped.is_set():
            item = await subscription.queue.get()
            frames = []
            while isinstance(item, Delivery):  # what queued up meanwhile goes out in the same write
                sent[item.partition] = item.offset + 1
                shared = sent == item.after  # sent all up to here (it sees every project, or all was its own)
                frames.append(item.frame if shared else frame(item, encode_event_id(sent)))
                try:
                    item = subscription.queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
            subscription.written_at = loop.time()
            if frames:
                yield b"".join(frames)
            elif item is Signal.HEARTBEAT:
                yield heartbeat(encode_event_id(sent))
    finally:
        subscription.stop_heartbeats()
        broadcaster.unsubscribe(subscription)
