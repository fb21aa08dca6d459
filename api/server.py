"""Running the app with uvicorn inside an event loop that may be someone else's (`ctxbudget run`'s)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
from collections.abc import AsyncIterator, Callable, Generator

import uvicorn
from clickhouse_connect.driver.client import Client
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.app import create_app
from api.settings import ApiSettings
from core.settings import Settings

SHUTDOWN_GRACE_SECONDS = 5
"""How long a shutdown waits for requests in progress (open SSE streams are ended first)."""
FD_HEADROOM = 512
"""Descriptors left for everything else the process opens (Kafka connections, chdb's files, the table stores, logs)
when the connection cap is sized from the descriptor limit."""
MIN_CONNECTIONS = 64
FD_CEILING = 1 << 20
"""The soft descriptor limit asked for when the hard one is unlimited."""
OPEN_MAX = 10_240
"""macOS's most descriptors per process (its default soft limit is 256, which would cap the API at 64 connections):
asked for when the system refuses the hard limit."""
KEEP_ALIVE_SECONDS = 5
"""An idle keep-alive connection is closed after this."""
HEADER_TIMEOUT_SECONDS = 10.0
"""A request's headers must all arrive within this of the connection (or of the previous answer): uvicorn has no such
limit, so a client trickling header bytes would hold its connection for ever."""


class _HeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers do not arrive in time."""

    header_timeout = HEADER_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


def connection_cap(soft_fd_limit: int) -> int:
    """Open connections (SSE streams included) before uvicorn answers 503: all the descriptors the process may open
    less a headroom, so a flood meets the cap (a 503, the process unharmed) before the descriptor limit (failing
    accepts, and Kafka or chdb unable to open a file), and as many clients as the machine allows are served."""
    return max(MIN_CONNECTIONS, soft_fd_limit - FD_HEADROOM)


def raised_fd_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard one where the system allows it (a fixed 1,024 cap refused a
    1,000-client SSE run, and ~1,000 idle sockets made the API answer 503 to everyone), else to OPEN_MAX; the soft
    limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = FD_CEILING if hard == resource.RLIM_INFINITY else hard
    for wanted in (ceiling, min(ceiling, OPEN_MAX)):
        if wanted <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            break
        except (ValueError, OSError):  # e.g. macOS: an unlimited hard limit, yet no soft one above its OPEN_MAX
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class _EmbeddedServer(uvicorn.Server):
    """Leaves signals to the process: cancelling `serve` (or leaving `running`) is how it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.asynccontextmanager
async def running(
    app: FastAPI, host: str, port: int, header_timeout: float = HEADER_TIMEOUT_SECONDS
) -> AsyncIterator[str]:
    """The app served until the block ends; yields its base URL (port 0 picks a free port)."""
    protocol = type("HeaderDeadline", (_HeaderDeadline,), {"header_timeout": header_timeout})
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        http=protocol,
        limit_concurrency=connection_cap(raised_fd_limit()),
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
        # What startup built (modules, schemas, the app, chdb's bindings) lives as long as the process: moved out of
        # the collector's reach, the full collections that requests' garbage triggers no longer walk all of it.
        gc.freeze()
        if announce is not None:
            announce(url)
        await asyncio.Event().wait()
