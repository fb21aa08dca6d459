"""The MCP server's contract and its pure parts, over an app with fakes (the real stores: tests/integration)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from starlette.responses import StreamingResponse

from api.mcp_server.asgi_stream import StreamingASGITransport
from api.mcp_server.mount import request_token
from api.mcp_server.rest import RestApi
from api.mcp_server.tools import build_server
from api.mcp_server.updates import resource_path, resource_uris, shows
from api.settings import ApiSettings
from api.tokens import Role
from tests.unit.api.fakes import EmptyDatabase, RecordingPublisher, bearer, make_app

TOOLS = {
    "list_projects",
    "project_threads",
    "thread_budget",
    "list_alerts",
    "ack_alert",
    "open_actions",
    "ack_action",
    "complete_action",
    "request_handoff",
    "thread_handoff_packages",
    "read_handoff_package",
    "consume_handoff_package",
    "request_compaction",
    "relay_schedule",
}


async def test_the_tool_names_are_the_contract_and_each_says_what_it_asks_of_the_master(tmp_path: Path) -> None:
    app = make_app(tmp_path, RecordingPublisher(), clickhouse=EmptyDatabase())
    token = bearer(Role.USER, "kris", "proj-001")["Authorization"].removeprefix("Bearer ")
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url="http://api") as http,
        Client(build_server(RestApi(http, lambda _: token))) as client,
    ):
        tools = (await client.list_tools()).tools
        empty = await client.call_tool("list_projects", {})
        missing = await client.call_tool("read_handoff_package", {"package_id": "hp-1"})
        bad = await client.call_tool("thread_budget", {"thread_id": "two words"})
    assert {tool.name for tool in tools} == TOOLS
    assert all(len(tool.description or "") > 60 for tool in tools)
    assert (empty.is_error, empty.structured_content) == (False, {"items": [], "schema_version": 1})
    assert missing.is_error
    assert missing.content[0].text.endswith("404: handoff package not found")
    assert bad.is_error  # refused by the tool's own schema, before any request


def test_an_event_touches_its_projects_and_its_threads_resource() -> None:
    assert resource_uris({"project_id": "p", "thread_id": "t"}) == ["ctxbudget://projects/p", "ctxbudget://threads/t"]
    assert resource_uris({"project_id": "p"}) == ["ctxbudget://projects/p"]
    assert resource_uris({"project_id": 3}) == []


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("ctxbudget://projects/p-1", "/api/v1/projects/p-1"),
        ("ctxbudget://threads/t/../x", "/api/v1/threads/t%2F..%2Fx/context-budget"),  # one segment, never a route
        ("ctxbudget://threads/", None),
        ("file:///etc/passwd", None),
    ],
)
def test_a_resource_uri_reads_one_route_with_its_id_as_one_segment(uri: str, path: str | None) -> None:
    assert resource_path(uri) == path


def test_the_forwarded_token_is_the_bearer_one_only() -> None:
    assert request_token({"authorization": "Bearer abc"}) == "abc"
    assert request_token({"authorization": "bearer abc"}) == "abc"
    assert request_token({"authorization": "Basic abc"}) is None
    assert request_token({}) is None
    assert request_token(None) is None


async def test_the_in_process_transport_streams_an_answer_that_never_ends() -> None:
    """What `/mcp` needs for the event stream: parts as the app sends them, and a close that ends the app."""
    sent, ended = asyncio.Event(), asyncio.Event()

    async def endless():
        try:
            yield b"first\n"
            sent.set()
            await asyncio.Event().wait()
        finally:
            ended.set()

    async def app(scope, receive, send) -> None:
        await StreamingResponse(endless())(scope, receive, send)

    async with httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url="http://x") as http:
        async with asyncio.timeout(5), http.stream("GET", "/") as response:
            assert response.status_code == 200
            assert await anext(response.aiter_lines()) == "first"
        async with asyncio.timeout(5):
            await ended.wait()
    assert sent.is_set()


async def test_the_in_process_transport_raises_what_the_app_raised_before_answering() -> None:
    async def broken(scope, receive, send) -> None:
        raise RuntimeError("no answer")

    async with httpx2.AsyncClient(transport=StreamingASGITransport(broken), base_url="http://x") as http:
        with pytest.raises(RuntimeError, match="no answer"):
            await http.get("/")


def test_a_notice_waits_for_a_thread_read_stamped_at_or_after_its_event_and_else_for_a_changed_read() -> None:
    thread, project = "ctxbudget://threads/t-1", "ctxbudget://projects/p-1"
    old = {"updated_at": "2026-03-25T08:00:01Z", "context_budget_level": "watch"}
    new = {"updated_at": "2026-03-25T08:00:05.250Z", "context_budget_level": "urgent"}
    assert not shows(thread, "2026-03-25T08:00:05.250Z", old, old)  # the sink has not written the change yet
    assert shows(thread, "2026-03-25T08:00:05.250Z", new, old)
    assert shows(thread, "2026-03-25T08:00:04Z", new, new)  # already there when the event came
    assert not shows(project, "2026-03-25T08:00:05Z", {"threads": 1}, {"threads": 1})
    assert shows(project, "2026-03-25T08:00:05Z", {"threads": 2}, {"threads": 1})


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_an_mcp_session_answers_only_the_principal_that_opened_it(tmp_path: Path) -> None:
    app = make_app(tmp_path, RecordingPublisher(), clickhouse=EmptyDatabase())
    initialize, accept = INITIALIZE, ACCEPT
    owner, same_user_new_token = bearer(Role.USER, "kris", "proj-001"), bearer(Role.USER, "kris", "proj-001")
    others = [bearer(Role.USER, "mallory", "proj-001"), bearer(Role.USER, "kris", "proj-002")]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with TestClient(app) as client:
        opened = client.post("/mcp", json=initialize, headers=accept | owner)
        assert opened.status_code == 200
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        for other in others:  # another user, or the same one with other projects: as if the session did not exist
            assert client.post("/mcp", json=ping, headers=accept | other | session).status_code == 404
        assert client.post("/mcp", json=ping, headers=accept | same_user_new_token | session).status_code == 200


def test_an_idle_mcp_session_is_closed(tmp_path: Path) -> None:
    app = make_app(
        tmp_path, RecordingPublisher(), clickhouse=EmptyDatabase(), api=ApiSettings(mcp_session_idle_seconds=0.3)
    )
    owner = bearer(Role.USER, "kris", "proj-001")
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with TestClient(app) as client:
        opened = client.post("/mcp", json=INITIALIZE, headers=ACCEPT | owner)
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        assert client.post("/mcp", json=ping, headers=ACCEPT | owner | session).status_code == 200
        time.sleep(1.0)
        assert client.post("/mcp", json=ping, headers=ACCEPT | owner | session).status_code == 404


async def test_an_aborted_mcp_body_is_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(tmp_path, RecordingPublisher(), clickhouse=EmptyDatabase())
    headers = [(b"authorization", bearer(Role.USER, "kris", "proj-001")["Authorization"].encode())]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp", "query_string": b""}
    scope |= {"headers": [*headers, (b"content-type", b"application/json")], "http_version": "1.1"}
    scope |= {"scheme": "http", "server": ("api", 80), "client": ("127.0.0.1", 1), "root_path": ""}
    messages = iter([{"type": "http.request", "body": b'{"jsonrpc": "2.0", "id"', "more_body": True}])
    sent: list[dict] = []

    async def receive() -> dict:
        return next(messages, {"type": "http.disconnect"})

    async def send(message: dict) -> None:
        sent.append(message)

    caplog.set_level(logging.INFO)
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    assert [r.getMessage() for r in caplog.records if "aborted" in r.getMessage()] == [
        "client aborted its request body: POST /mcp after 23 bytes"
    ]
    assert not [r for r in caplog.records if r.exc_info]
