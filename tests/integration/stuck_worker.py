"""A worker whose stop never finishes: `python -m tests.integration.stuck_worker` with CTXBUDGET_* settings.

It prints `started` once running and `stopping` once its stop has begun, then awaits for ever in `never_stops`."""

from __future__ import annotations

import asyncio
import sys

from mode import Service

from streams.app import Worker, create_app
from streams.settings import Settings


class Stuck(Service):
    async def on_started(self) -> None:
        print("started", file=sys.__stdout__, flush=True)

    async def on_stop(self) -> None:
        print("stopping", file=sys.__stdout__, flush=True)
        await never_stops()


async def never_stops() -> None:
    await asyncio.Event().wait()


def main() -> None:
    settings = Settings()
    app = create_app(settings)
    Worker(app, Stuck(), quiet=True, shutdown_seconds=settings.shutdown_seconds).execute_from_commandline()


if __name__ == "__main__":
    main()
