"""An httpx2 transport into an ASGI app that hands the answer over as the app sends it.

httpx2's own ASGITransport answers once the app has finished, and an SSE answer (`/api/v1/events`) never finishes:
the tools of `/mcp` would wait for ever on the event stream they follow. Here the app runs in a task of its own, the
response starts at `http.response.start`, each body part is read as it is sent, and closing the response tells the
app the client went away (`http.disconnect`), as a server would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx2
from starlette.types import ASGIApp


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for (k, v) in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": ("127.0.0.1", 0),
            "root_path": "",
        }
        request_body = aiter(request.stream)  # type: ignore[arg-type]
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        parts: asyncio.Queue[bytes | None] = asyncio.Queue()
        gone = asyncio.Event()
        sent_all = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_all
            if sent_all:
                await gone.wait()
                return {"type": "http.disconnect"}
            try:
                return {"type": "http.request", "body": await anext(request_body), "more_body": True}
            except StopAsyncIteration:
                sent_all = True
                return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.set_result((message["status"], message.get("headers", [])))
            elif message["type"] == "http.response.body":
                if body := message.get("body", b""):
                    parts.put_nowait(body)
                if not message.get("more_body", False):
                    parts.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as error:
                if not started.done():
                    started.set_exception(error)
            finally:
                parts.put_nowait(None)

        task = asyncio.create_task(run(), name=f"asgi {request.method} {request.url.path}")
        try:
            status, headers = await started
        except BaseException:
            task.cancel()
            raise
        return httpx2.Response(status, headers=headers, stream=_Body(parts, task, gone))


class _Body(httpx2.AsyncByteStream):
    def __init__(self, parts: asyncio.Queue[bytes | None], task: asyncio.Task[None], gone: asyncio.Event) -> None:
        self.parts, self.task, self.gone = parts, task, gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (part := await self.parts.get()) is not None:
            yield part

    async def aclose(self) -> None:
        self.gone.set()
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
