"""Batches from a Faust stream that keep filling while the caller works on the previous one.

Faust's `Stream.take_events` lets a single event into its buffer while the caller holds a batch, so reading a topic
and folding it took turns: in an engine worker's trace, each batch waited its whole `within` (50 ms) to fill after
the previous one was published, as long as the fold took to apply it. Here the stream goes on buffering up to `max_`
events meanwhile, which fill the next batch while this one's outputs await Kafka. Everything else is as Faust's:
acks are the caller's (the stream's own are off), each yielded event is acknowledged once more after the caller is
done with it (the fold holds an extra reference for that, runtime/agents.py), and a batch has at most `max_` events.
Events buffered but never yielded (the agent stopped or was restarted by a rebalance) are let go unacknowledged, as
the fold does with a batch it drops: the commit follows what was applied, and they are delivered again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import faust


def take_ahead(
    stream: faust.StreamT, max_: int, within: float, release: Callable[[faust.EventT], None]
) -> AsyncIterator[list[faust.EventT]]:
    """Batches of at most `max_` events, each as soon as `max_` are buffered or `within` seconds after the last.
    `release` lets go of an event that is never yielded."""
    agen = _batches(stream, max_, within, release)
    stream._active_agens.add(agen)  # type: ignore[attr-defined]  # closed with the stream, as Faust's own
    return agen


async def _batches(
    stream: faust.StreamT, max_: int, within: float, release: Callable[[faust.EventT], None]
) -> AsyncIterator[list[faust.EventT]]:
    buffered: list[faust.EventT] = []
    full = asyncio.Event()
    room = asyncio.Event()
    room.set()

    async def add_to_buffer(value: object) -> object:
        event = stream.current_event
        if event is None:
            raise RuntimeError("take_ahead found no current event")
        buffered.append(event)
        if len(buffered) >= max_:
            full.set()
            room.clear()
            await stream.wait(room)  # type: ignore[arg-type]  # until the batch is taken (or the stream stops)
        return value

    acks = stream.enable_acks
    stream.enable_acks = False
    stream.add_processor(add_to_buffer)
    stream._enable_passive(aiter(stream.channel))  # type: ignore[attr-defined]
    try:
        # The app stopping ends it too: Faust restarts an actor whose cancellation it takes for a rebalance's, and
        # that can happen as the worker stops, after the agent's own stop has cancelled what it knew of.
        while not (stream.should_stop or stream.app.should_stop):
            await stream.wait_for_stopped(full, timeout=within)  # type: ignore[arg-type]
            if not buffered:
                continue
            batch = buffered[:]
            buffered.clear()
            full.clear()
            room.set()
            try:
                yield batch
            finally:
                for event in batch:
                    await stream.ack(event)
    finally:
        for event in buffered:
            release(event)
        buffered.clear()
        room.set()
        stream.enable_acks = acks
        stream._processors.remove(add_to_buffer)  # type: ignore[attr-defined]
