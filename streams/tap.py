"""A fold's records straight from Faust's conductor, in batches, with no Stream in between.

Faust hands every fetched record to the channels that read its topic: its conductor puts the record's event on each
channel's queue, and an agent's Stream then iterates that queue one event at a time (sensors, processors, the current
event's context, an await per event). A fold needs none of that: it takes batches, acknowledges each record itself,
and its order and rebalance discipline is `OrderedIntake`'s. Measured with `bench/faust_floor.py` on one broker, an
agent that only acknowledges reads 8-12k records/s, and the same app, consumer and conductor fill a list at 64-72k/s.

`tap_topic` registers a topic whose channel queue is a `Tap`. The conductor appends each event to it, or, once it
holds `capacity`, awaits room, which holds the fetcher back as a full Stream buffer does. Like the Stream it
replaces, the tap lets through only records of the current consumer generation: one fetched before a rebalance is
released (its partition may have moved), and the seek that ends the rebalance delivers it again if it is still ours.
Faust's flow control clears the tap when partitions are revoked, releasing what it held.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

import faust

Release = Callable[[faust.EventT], None]


class Tap:
    """The channel queue of a tapped topic: what the conductor delivers, taken in batches of at most `max_`, each as
    soon as `max_` are buffered or `within` seconds after the last."""

    def __init__(self, app: faust.App, max_: int, within: float, release: Release) -> None:
        self.app = app
        self.max_ = max_
        self.within = within
        self.capacity = 2 * max_
        """One batch filling while the previous one is applied, and as much again before the fetcher waits."""
        self.release = release
        self.events: list[faust.EventT] = []
        self._batch_ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        app.flow_control.manage_queue(self)  # type: ignore[arg-type]  # cleared with Faust's queues on revocation

    # -- the queue interface Faust's conductor uses -----------------------------------------------------------------
    def full(self) -> bool:
        return len(self.events) >= self.capacity

    def put_nowait_enhanced(self, value: faust.EventT, **_: object) -> None:
        self.events.append(value)
        if len(self.events) >= self.max_:
            self._batch_ready.set()
        if self.full():
            self._room.clear()

    async def put(self, value: faust.EventT) -> None:
        while self.full():
            await self._room.wait()
        self.put_nowait_enhanced(value)

    def clear(self) -> None:
        self._let_go(self.events)
        self.events = []
        self._room.set()

    # -- the fold's side --------------------------------------------------------------------------------------------
    async def batches(self) -> AsyncIterator[list[faust.EventT]]:
        while True:
            if len(self.events) < self.max_:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._batch_ready.wait(), self.within)
            self._batch_ready.clear()
            taken, self.events = self.events[: self.max_], self.events[self.max_ :]
            if len(self.events) >= self.max_:
                self._batch_ready.set()
            if not self.full():
                self._room.set()
            generation = self.app.consumer_generation_id
            current = [event for event in taken if event.message.generation_id == generation]
            if len(current) < len(taken):
                self._let_go([event for event in taken if event.message.generation_id != generation])
            if current:
                yield current

    def _let_go(self, events: Sequence[faust.EventT]) -> None:
        for event in events:
            self.release(event)


class TapTopic(faust.Topic):
    """A topic read through a `Tap` instead of a Stream (see the module's docstring)."""

    tap: Tap
    fold: str
    """The name of the fold that reads it."""

    @property
    def queue(self) -> Tap:  # type: ignore[override]
        return self.tap

    async def put(self, value: faust.EventT) -> None:  # type: ignore[override]  # the conductor's path when full
        await self.tap.put(value)


def tap_topic(app: faust.App, fold: str, topics: Sequence[str], tap: Tap, **options: object) -> TapTopic:
    """Subscribe the app to `topics`, delivered to `tap`."""
    topic = TapTopic(app, topics=list(topics), **options)  # type: ignore[arg-type]
    topic.tap, topic.fold = tap, fold
    app.topics.add(topic)
    return topic


def tapped(app: faust.App) -> dict[str, TapTopic]:
    """The app's tapped topics by the fold that reads them."""
    return {channel.fold: channel for channel in app.topics if isinstance(channel, TapTopic)}
