"""Resource-updated notifications: a subscribed master hears that a project or thread changed, without polling.

A client subscribes with `subscriptions/listen` (MCP 2026-07-28) naming resource URIs, or with `resources/subscribe`
one URI at a time (the handshake era, up to 2025-11-25, which Claude Code and Codex may still speak). Each URI is
read through the API with the caller's token first, so a caller may only watch what it may read (another project's
thread is refused like an unknown one). While a subscription lasts, the API's SSE stream (`/api/v1/events`, spec 6.4
and the action events), read with that same token, becomes `notifications/resources/updated` for the URIs of each
event's project and thread: the SDK delivers it to the listen streams that named the URI, and this module to the
sessions that subscribed to it with that token. Events are cues to refetch, never payloads, so a repeat (two callers
of one project each following the stream) costs one extra read.

An event reaches the stream before the sinks have written its change to ClickHouse, so a notice sent at once would
make the master read the old state and hear nothing more. A notice therefore waits until a read of the resource
shows the change (`shows`): a thread read whose `updated_at` has reached the event's `occurred_at` (the engine
stamps both with the same instant), or any other read that differs from the one last notified; at the latest after
SETTLE_SECONDS it goes out anyway (a lagging sink delays a notice, never loses it). Events of one resource arriving
meanwhile share the wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import httpx2
import orjson
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)

from api.mcp_server.rest import ApiRefused, Headers, RestApi, segment

PROJECTS = "ctxbudget://projects/"
THREADS = "ctxbudget://threads/"
EVENTS_PATH = "/api/v1/events"
THREAD_PATH = "/api/v1/threads/{}/context-budget"
RECONNECT_SECONDS = 1.0
SETTLE_SECONDS = 10.0
"""The longest a notice waits for a read to show its event's change."""
FIRST_READ_SECONDS = 0.05
"""The first look after an event; each next waits twice as long, up to MAX_READ_SECONDS."""
MAX_READ_SECONDS = 1.0
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


def shows(uri: str, occurred_at: str | None, read: object, notified: object) -> bool:
    """Whether `read` (the JSON a read of `uri` answered) shows the change of an event that occurred at
    `occurred_at` (the latest of those waiting), when `notified` is what the master could read at the last notice."""
    updated_at = read.get("updated_at") if isinstance(read, dict) else None
    if uri.startswith(THREADS) and occurred_at is not None and isinstance(updated_at, str):
        try:
            return _instant(updated_at) >= _instant(occurred_at)
        except ValueError:
            pass
    return read != notified


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value)


def connection_of(session: ServerSession) -> Connection:
    """The client connection a request's session belongs to: a handshake-era subscription lasts as long as the
    connection, while the SDK (2.3) makes a session per request and keeps the connection private."""
    return session._connection


@dataclass
class _Follower:
    key: str
    """The Authorization header it follows the event stream with."""
    task: asyncio.Task[None] | None = None
    users: int = 0
    """Open listen streams, plus the (session, URI) subscriptions of handshake-era clients."""
    sessions: dict[Connection, tuple[ServerSession, set[str]]] = field(default_factory=dict)
    """By client connection: a session to notify it through, and the URIs it subscribed to."""
    notified: dict[str, object] = field(default_factory=dict)
    """By URI: the read the last notice (or the subscription's check) showed."""
    waiting: dict[str, str | None] = field(default_factory=dict)
    """By URI with a notice waiting for a read to show its change: the latest `occurred_at` it waits for."""
    settling: set[asyncio.Task[None]] = field(default_factory=set)
    listened: Counter[str] = field(default_factory=Counter)
    """The URIs its open listen streams name (a notice is prepared only for a URI someone watches)."""

    def watches(self, uri: str) -> bool:
        return uri in self.listened or any(uri in watched for _, watched in self.sessions.values())


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
        reads = await self._check_readable(request_headers, uris)
        if not uris:
            return await call_next(context)
        key = self._acquire(self.rest.headers(request_headers), reads)
        listened = self._followers[key].listened
        listened.update(uris)
        try:
            return await call_next(context)
        finally:
            listened.subtract(uris)
            listened += Counter()  # drops the URIs no stream names any more
            self._release(key)

    def serve_legacy_subscriptions(self, server: MCPServer) -> None:
        """`resources/subscribe` and `unsubscribe` for clients of the handshake era (up to 2025-11-25), which hear
        updates on their session instead of a listen stream. MCPServer has no public handle for a spec method it does
        not serve itself; the SDK's documented way is the low-level server's `add_request_handler`."""
        lowlevel = server._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)

    async def _subscribe(self, context: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
        request_headers: Headers = getattr(context.request, "headers", None)
        reads = await self._check_readable(request_headers, [params.uri])
        key = self._acquire(self.rest.headers(request_headers), reads)
        connection = connection_of(context.session)
        sessions = self._followers[key].sessions
        if connection not in sessions:  # its subscriptions end with it: a DELETE, the idle timeout, a crash
            sessions[connection] = (context.session, set())
            connection.exit_stack.callback(self._forget, key, connection)
        _, watched = sessions[connection]
        if params.uri in watched:
            self._release(key)  # a repeat: counted once
        watched.add(params.uri)
        return EmptyResult()

    async def _unsubscribe(self, context: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
        for key, follower in list(self._followers.items()):
            connection = connection_of(context.session)
            _, watched = follower.sessions.get(connection, (None, set()))
            if params.uri in watched:
                watched.discard(params.uri)
                if not watched:
                    del follower.sessions[connection]
                self._release(key)
        return EmptyResult()

    def _forget(self, key: str, connection: Connection) -> None:
        """A connection closed: its subscriptions end, and its follower with the last of them."""
        follower = self._followers.get(key)
        if follower is not None and connection in follower.sessions:
            _, watched = follower.sessions.pop(connection)
            for _ in watched:
                self._release(key)

    async def _check_readable(self, request_headers: Headers, uris: list[str]) -> dict[str, object]:
        """What each URI reads now (the baseline its first notice is compared with); refused if any is unreadable."""
        reads: dict[str, object] = {}
        for uri in uris:
            path = resource_path(uri)
            try:
                if path is None:
                    raise MCPError(INVALID_REQUEST, REFUSED)
                reads[uri] = await self.rest.call(request_headers, "GET", path)
            except ApiRefused as refused:
                raise MCPError(INVALID_REQUEST, REFUSED) from refused
        return reads

    def _acquire(self, headers: dict[str, str], reads: dict[str, object]) -> str:
        """The token's follower, started by its first user."""
        key = headers.get("Authorization", "")
        follower = self._followers.setdefault(key, _Follower(key))
        if follower.task is None:
            follower.task = asyncio.create_task(self._follow(headers, follower), name="mcp-resource-updates")
        follower.users += 1
        for uri, read in reads.items():
            follower.notified.setdefault(uri, read)
        return key

    def _release(self, key: str) -> None:
        follower = self._followers[key]
        follower.users -= 1
        if follower.users == 0:
            del self._followers[key]
            for task in (follower.task, *follower.settling):
                if task is not None:
                    task.cancel()

    async def _follow(self, headers: dict[str, str], follower: _Follower) -> None:
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
                                await self._publish(line.removeprefix("data:"), follower)
            except httpx2.TransportError as error:  # the API restarting: follow again
                logging.getLogger(__name__).info("the event stream dropped: %s", error)
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _publish(self, data: str, follower: _Follower) -> None:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        occurred_at = event.get("occurred_at") if isinstance(event.get("occurred_at"), str) else None
        for uri in filter(follower.watches, resource_uris(event)):
            if uri in follower.waiting:  # a notice already waits for this resource: it waits for this change too
                previous = follower.waiting[uri]
                follower.waiting[uri] = max(previous, occurred_at) if previous and occurred_at else occurred_at
                continue
            follower.waiting[uri] = occurred_at
            settle = asyncio.create_task(self._settle(uri, follower), name="mcp-resource-settle")
            follower.settling.add(settle)
            settle.add_done_callback(follower.settling.discard)

    async def _settle(self, uri: str, follower: _Follower) -> None:
        """Notify `uri`'s watchers once a read shows what the waiting events changed, or after SETTLE_SECONDS."""
        path, pause = resource_path(uri), FIRST_READ_SECONDS
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_SECONDS
        read: object = None
        while path is not None and loop.time() < deadline:
            await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
            pause = min(pause * 2, MAX_READ_SECONDS)
            try:
                response = await self.rest.client.get(path, headers={"Authorization": follower.key})
            except httpx2.TransportError:
                continue
            if response.status_code != 200:
                break  # no longer readable with this token: the notice says so by the read it prompts
            read = response.json()
            if shows(uri, follower.waiting.get(uri), read, follower.notified.get(uri)):
                break
        follower.waiting.pop(uri, None)
        if read is not None:
            follower.notified[uri] = read
        await self._notify(uri, follower)

    async def _notify(self, uri: str, follower: _Follower) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        for session, watched in list(follower.sessions.values()):
            if uri in watched:
                await session.send_resource_updated(uri)  # best effort: a closed connection drops it
