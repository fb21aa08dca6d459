"""Faust's own floor on a machine: one agent over the worker's input topics that does nothing but acknowledge.

    .venv/bin/python bench/faust_floor.py BOOTSTRAP PREFIX RECORDS

Reads RECORDS records from the prefixed `snapshots`, `session-events` and `handoff-packages` topics the way every fold
of the worker does (the app of `streams.app`, `take_ahead` batches of the configured size), in a consumer group of
its own, and prints `floor N records/s` from the first batch to the last. `bench/engine_bench.py` runs it as the ceiling
of any Faust agent, between the raw aiokafka ceiling and the worker.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid

import faust

from streams.app import Worker, create_app
from streams.runtime import Runtime
from streams.settings import Settings
from streams.take_ahead import take_ahead


def main() -> None:
    bootstrap, prefix, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
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

    @app.agent(runtime.topic("snapshots", "session-events", "handoff-packages"), name="floor")
    async def floor(stream: faust.StreamT) -> None:
        nonlocal seen, started
        async for events in take_ahead(stream, settings.batch_size, settings.batch_seconds, release=lambda _: None):
            started = started or time.perf_counter()
            for event in events:
                await stream.ack(event)
            seen += len(events)
            if seen >= total:
                print(f"\nfloor {seen / (time.perf_counter() - started):.0f} records/s", flush=True)
                os._exit(0)  # the figure is out; a clean Faust shutdown only adds seconds

    worker = Worker(
        app, loglevel="error", quiet=True, redirect_stdouts=False, shutdown_seconds=settings.shutdown_seconds
    )
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
