"""Faust's own floor on a machine: one agent over the worker's input topics that does nothing but acknowledge.

    .venv/bin/python bench/faust_floor.py BOOTSTRAP PREFIX RECORDS [stream|tap]

Reads RECORDS records from the prefixed `snapshots`, `session-events` and `handoff-packages` topics the way every fold
of the worker does (`streams.runtime.app`, `take_ahead` batches of the configured size), in a consumer group of
its own, and prints `floor N records/s` from the first batch to the last. `bench/engine_bench.py` runs it as the ceiling
of any Faust agent, between the raw aiokafka ceiling and the worker.

`tap` measures the design the folds could move to: the same app, consumer and conductor, but the conductor hands each
record's event straight to a batch buffer (it is the channel's queue), read by a task with no Stream, no agent and
no per-event iteration; it prints `tap N records/s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator

import faust

from core.settings import Settings
from streams.runtime.agents import RAW, Runtime
from streams.runtime.app import Worker, create_app
from streams.runtime.take_ahead import take_ahead


class Tap:
    """Stands in for a topic's channel queue: Faust's conductor appends every fetched record's event to it."""

    def __init__(self, max_: int) -> None:
        self.events: list[faust.EventT] = []
        self.max_ = max_
        self.filled = asyncio.Event()

    def full(self) -> bool:
        return False

    def put_nowait_enhanced(self, value: faust.EventT, **_: object) -> None:
        self.events.append(value)
        if len(self.events) >= self.max_:
            self.filled.set()

    async def batches(self, within: float) -> AsyncIterator[list[faust.EventT]]:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.filled.wait(), within)
            self.filled.clear()
            if self.events:
                batch, self.events = self.events, []
                yield batch


class TapTopic(faust.Topic):
    tap: Tap

    @property
    def queue(self) -> Tap:  # type: ignore[override]
        return self.tap


def main() -> None:
    bootstrap, prefix, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "stream"
    settings = Settings(
        kafka_bootstrap_servers=bootstrap,
        topic_prefix=prefix,
        app_id=f"floor-{uuid.uuid4().hex[:6]}",
        data_dir=tempfile.mkdtemp(prefix="floor-"),
        worker_web_port=None,
    )
    app = create_app(settings)
    runtime = Runtime(app, settings)
    seen, started = 0, 0.0

    inputs = ("snapshots", "session-events", "handoff-packages")

    def count(events: list[faust.EventT]) -> None:
        nonlocal seen, started
        started = started or time.perf_counter()
        seen += len(events)
        if seen >= total:
            print(f"\n{mode if mode == 'tap' else 'floor'} {seen / (time.perf_counter() - started):.0f} records/s")
            sys.stdout.flush()
            os._exit(0)  # the figure is out; a clean Faust shutdown only adds seconds

    if mode == "tap":
        topic = TapTopic(app, topics=[settings.topic(n) for n in inputs], **RAW)
        topic.tap = Tap(settings.batch_size)
        app.topics.add(topic)

        @app.task
        async def tap() -> None:
            async for events in topic.tap.batches(settings.batch_seconds):
                for event in events:
                    event.ack()
                count(events)
    else:

        @app.agent(runtime.topic(*inputs), name="floor")
        async def floor(stream: faust.StreamT) -> None:
            async for events in take_ahead(stream, settings.batch_size, settings.batch_seconds, release=lambda _: None):
                for event in events:
                    await stream.ack(event)
                count(events)

    worker = Worker(
        app, loglevel="error", quiet=True, redirect_stdouts=False, shutdown_seconds=settings.shutdown_seconds
    )
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
