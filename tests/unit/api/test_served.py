"""The app served by uvicorn on a real socket (issue 20.5): security headers, slow clients cut off, an aborted body
is one log line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import time

import httpx
import pytest

from api import server
from api.server import OPEN_MAX, connection_cap, raised_fd_limit, running
from api.settings import ApiSettings
from api.tokens import Role
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app

WORKER = bearer(Role.WORKER, "worker-mac-01", "proj-001")


@pytest.mark.parametrize("path", ["/", "/static/js/main.js", "/api/v1/conversations", "/healthz"])
async def test_answers_carry_the_security_headers(tmp_path, path: str) -> None:
    app = make_app(tmp_path, RecordingPublisher())
    async with running(app, "127.0.0.1", 0) as url, httpx.AsyncClient(base_url=url) as client:
        headers = (await client.get(path)).headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "default-src 'self'" in headers["content-security-policy"]
    json = headers["content-type"].startswith("application/json")
    assert (headers.get("cache-control") == "no-store") == json  # JSON carries callers' data; the page may be cached


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """What the server sent before it closed the connection; fails if it is still open after `seconds`."""
    async with asyncio.timeout(seconds):
        return await reader.read()


async def test_a_client_trickling_its_headers_is_disconnected(tmp_path) -> None:
    app = make_app(tmp_path, RecordingPublisher())
    async with running(app, "127.0.0.1", 0, header_timeout=0.5) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        started = time.monotonic()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError):
                for _ in range(20):
                    writer.write(b"X")
                    await writer.drain()
                    await asyncio.sleep(0.1)

        trickling = asyncio.create_task(trickle())
        assert await _closed_within(reader, 3) == b""
        assert time.monotonic() - started < 1.5
        trickling.cancel()
        writer.close()


async def test_a_slow_body_is_answered_408_and_an_aborted_one_logs_one_line(tmp_path, caplog) -> None:
    app = make_app(tmp_path, RecordingPublisher(), api=ApiSettings(body_timeout_seconds=0.5))
    async with running(app, "127.0.0.1", 0) as url:
        host, port = url.removeprefix("http://").split(":")
        head = (
            b"POST /api/v1/workers/worker-mac-01/thread-context HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
            + b"Content-Type: application/json\r\nAuthorization: "
            + WORKER["Authorization"].encode()
            + b"\r\n\r\n{"
        )
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head)
        answer = await _closed_within(reader, 3)
        assert answer.startswith(b"HTTP/1.1 408")
        writer.close()

        caplog.clear()
        with caplog.at_level(logging.INFO):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(head)
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.close()
            await asyncio.sleep(0.3)
    aborted = [r for r in caplog.records if "aborted" in r.getMessage()]
    assert len(aborted) == 1
    assert [r for r in caplog.records if r.exc_info] == []


async def test_a_thousand_idle_connections_leave_the_api_answering(tmp_path) -> None:
    """Issue 38, 6: a fixed cap of 1,000 connections let ~1,000 idle sockets (no token needed) make every caller's
    answer a 503. The cap now follows the descriptor limit, raised to the hard one."""
    assert connection_cap(raised_fd_limit()) > IDLE_SOCKETS
    app = make_app(tmp_path, RecordingPublisher())
    async with running(app, "127.0.0.1", 0) as url:
        host, port = url.removeprefix("http://").split(":")
        idle = [(await asyncio.open_connection(host, int(port)))[1] for _ in range(IDLE_SOCKETS)]
        try:
            async with httpx.AsyncClient(base_url=url) as client:
                assert (await client.get("/healthz")).status_code == 200
        finally:
            for writer in idle:
                writer.close()


class RefusingLimits:
    """`resource` as macOS has it by default: soft 256, hard unlimited, no soft limit above OPEN_MAX."""

    RLIMIT_NOFILE, RLIM_INFINITY = resource.RLIMIT_NOFILE, resource.RLIM_INFINITY

    def __init__(self) -> None:
        self.soft = 256

    def getrlimit(self, which: int) -> tuple[int, int]:
        return self.soft, self.RLIM_INFINITY

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        if limits[0] > OPEN_MAX:
            raise ValueError("current limit exceeds maximum limit")
        self.soft = limits[0]


def test_the_descriptor_limit_is_raised_to_open_max_where_the_hard_limit_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(server, "resource", RefusingLimits())
    assert raised_fd_limit() == OPEN_MAX
    assert connection_cap(OPEN_MAX) > IDLE_SOCKETS  # room for 1,000 SSE clients with the system's defaults


IDLE_SOCKETS = 1_100
