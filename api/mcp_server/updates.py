"""Resource-updated notifications: a subscribed master hears that a project or thread changed, without polling.

A client subscribes with `subscriptions/listen` (MCP 2026-07-28) naming resource URIs. The gate reads each URI
through the API with the caller's token first, so a caller may only watch what it may read (another project's
thread is refused like an unknown one). While the stream is open, the API's SSE stream (`/api/v1/events`, spec 6.4
and the action events), read with that same token, is turned into `notifications/resources/updated` for the URIs of
each event's project and thread; the SDK delivers each to the streams that named that URI. Events are cues to
refetch, never payloads, so a repeat (two callers of one project each following the stream) costs one extra read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx2
import orjson
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST, SubscriptionsListenRequestParams

from api.mcp_server.rest import ApiRefused, Headers, RestApi, segment

PROJECTS = "ctxbudget://projects/"
THREADS = "ctxbudget://threads/"
EVENTS_PATH = "/api/v1/events"
THREAD_PATH = "/api/v1/threads/{}/context-budget"
RECONNECT_SECONDS = 1.0
REFUSED = "not permitted to watch the requested resources"
"""One message for every refusal, so it never tells which URI exists."""


def resource_uris(event: dict[str, object]) -> list[str]:
    """The resources an event changes: its project's and its thread's."""
    uris = []
    if isinstance(project := event.get("project_id"), str):
        uris.append(PROJECTS + project)
    if isinstance(thread := event.get("thread_id"), str):
        uris.append(THREADS + thread)
    return uris


def resource_path(uri: str) -> str | None:
    """The REST read behind one of our resource URIs, None for any other URI."""
    for prefix, path in ((PROJECTS, "/api/v1/projects/{}"), (THREADS, THREAD_PATH)):
        if uri.startswith(prefix) and uri != prefix:
            return path.format(segment(uri.removeprefix(prefix)))
    return None


@dataclass
class _Follower:
    task: asyncio.Task[None]
    streams: int = 0


@dataclass
class ResourceUpdates:
    """The bus of the server's `subscriptions/listen` streams, and one SSE follower per token with open streams."""

    rest: RestApi
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    _followers: dict[str, _Follower] = field(default_factory=dict)

    async def gate(self, context: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        """The server middleware: a listen stream only for readable URIs, with the caller's events followed while it
        is open; every other message passes as it came."""
        if context.method != "subscriptions/listen":
            return await call_next(context)
        params = SubscriptionsListenRequestParams.model_validate(context.params or {}, by_name=False)
        uris = params.notifications.resource_subscriptions or []
        request_headers: Headers = getattr(context.request, "headers", None)
        for uri in uris:
            path = resource_path(uri)
            try:
                if path is None:
                    raise MCPError(INVALID_REQUEST, REFUSED)
                await self.rest.call(request_headers, "GET", path)
            except ApiRefused as refused:
                raise MCPError(INVALID_REQUEST, REFUSED) from refused
        if not uris:
            return await call_next(context)
        async with self._following(self.rest.headers(request_headers)):
            return await call_next(context)

    @contextlib.asynccontextmanager
    async def _following(self, headers: dict[str, str]) -> AsyncIterator[None]:
        key = headers.get("Authorization", "")
        follower = self._followers.get(key)
        if follower is None:
            follower = _Follower(asyncio.create_task(self._follow(headers), name="mcp-resource-updates"))
            self._followers[key] = follower
        follower.streams += 1
        try:
            yield
        finally:
            follower.streams -= 1
            if follower.streams == 0:
                del self._followers[key]
                follower.task.cancel()

    async def _follow(self, headers: dict[str, str]) -> None:
        """The caller's SSE stream, resumed after a drop from the last event id seen, as resource updates."""
        last_id: str | None = None
        while True:
            resume = {"Last-Event-ID": last_id} if last_id else {}
            try:
                async with self.rest.client.stream(
                    "GET", EVENTS_PATH, headers=headers | resume, timeout=None
                ) as response:
                    if response.status_code != 200:
                        logging.getLogger(__name__).warning("the event stream answered %s", response.status_code)
                    else:
                        async for line in response.aiter_lines():
                            if line.startswith("id:"):
                                last_id = line.removeprefix("id:").strip()
                            elif line.startswith("data:"):
                                await self._publish(line.removeprefix("data:"))
            except httpx2.TransportError as error:  # the API restarting: follow again
                logging.getLogger(__name__).info("the event stream dropped: %s", error)
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _publish(self, data: str) -> None:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(event, dict):
            for uri in resource_uris(event):
                await self.bus.publish(ResourceUpdated(uri=uri))
