"""Running the app with uvicorn inside an event loop that may be someone else's (`ctxbudget run`'s)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Generator

import uvicorn
from clickhouse_connect.driver.client import Client
from fastapi import FastAPI

from api.app import create_app
from api.settings import ApiSettings
from streams.settings import Settings

SHUTDOWN_GRACE_SECONDS = 5
MAX_CONNECTIONS = 1_000
"""Open connections (SSE streams included) before uvicorn answers 503: a flood of slow clients cannot exhaust the
process's file descriptors."""
KEEP_ALIVE_SECONDS = 5
"""An idle keep-alive connection is closed after this."""
"""How long a shutdown waits for requests in progress (open SSE streams are ended first)."""


class _EmbeddedServer(uvicorn.Server):
    """Leaves signals to the process: cancelling `serve` (or leaving `running`) is how it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.asynccontextmanager
async def running(app: FastAPI, host: str, port: int) -> AsyncIterator[str]:
    """The app served until the block ends; yields its base URL (port 0 picks a free port)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(), name="api-server")
    while not server.started:
        if task.done():
            await task
            raise RuntimeError("the API did not start (see the log above)")
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        context = getattr(app.state, "context", None)  # set while the app's lifespan runs
        if context is not None:
            context.kafka.broadcaster.end_streams()
        server.should_exit = True
        await task


async def serve(
    settings: Settings,
    clickhouse: Client,
    api: ApiSettings | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the API on api.host:api.port until cancelled; shuts down gracefully either way. `announce` gets the
    base URL once it is bound (with port 0, the port picked)."""
    api = api or ApiSettings()
    async with running(create_app(settings, clickhouse, api), api.host, api.port) as url:
        if announce is not None:
            announce(url)
        await asyncio.Event().wait()
