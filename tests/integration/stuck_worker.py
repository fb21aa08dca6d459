"""Workers that get stuck: `python -m tests.integration.stuck_worker {stop|recovery}` with CTXBUDGET_* settings.

- stop: it prints `started` once running and `stopping` once its stop has begun, then awaits for ever in
  `never_stops`.
- recovery: its one table's recovery never gets the changelogs' end offsets (`never_answers`), so its first rebalance
  never ends; it serves the worker's /healthz and /readyz.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from faust.tables.recovery import Recovery
from mode import Service

from core.health import FailingAgents
from core.logs import logging_config
from core.settings import Settings
from streams.runtime import observability
from streams.runtime.app import Worker, create_app


class Stuck(Service):
    async def on_started(self) -> None:
        print("started", file=sys.__stdout__, flush=True)

    async def on_stop(self) -> None:
        print("stopping", file=sys.__stdout__, flush=True)
        await never_stops()


async def never_stops() -> None:
    await asyncio.Event().wait()


async def never_answers(*args: Any) -> None:
    await asyncio.Event().wait()


def main() -> None:
    settings = Settings()
    app = create_app(settings)
    services: list[Service] = []
    if sys.argv[1] == "stop":
        services.append(Stuck())
    else:
        app.Table("stuck", partitions=settings.topic_partitions, default=None, key_type=bytes, value_type=bytes)
        observability.install(app, settings, None, FailingAgents())
        Recovery._build_highwaters = never_answers  # type: ignore[method-assign]
    Worker(
        app,
        *services,
        loglevel=settings.log_level,
        logging_config=logging_config(settings.log_level, settings.log_format),
        quiet=True,
        shutdown_seconds=settings.shutdown_seconds,
    ).execute_from_commandline()


if __name__ == "__main__":
    main()
