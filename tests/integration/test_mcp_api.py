"""The MCP server (issue 21) over the API on the real ClickHouse: every tool through the SDK's in-memory client,
REST and MCP answering the same for the same state, isolation through MCP, and `/mcp` mounted in the app."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

import httpx2
import orjson
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceUpdatedNotification

from api.mcp_server.asgi_stream import StreamingASGITransport
from api.mcp_server.mount import MCP_PATH
from api.mcp_server.rest import RestApi
from api.mcp_server.tools import build_server
from api.thread_book import ThreadBook
from api.tokens import Role
from schemas import MasterActionCommand, ThreadHandoffRequired
from schemas.codec import encode_record
from schemas.copies import replaced
from tests.integration.test_api import World, publisher, store, user_of, world  # noqa: F401  (fixtures)
from tests.integration.test_master_actions_api import latest_states
from tests.integration.test_relay_api import packages  # noqa: F401  (fixture)
from tests.unit.api.events_builders import client_event, raw_record
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app
from tests.unit.sinks.records import project_detail

pytestmark = pytest.mark.clickhouse


def token_in(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


Served = Callable[[], AbstractAsyncContextManager[tuple[FastAPI, httpx2.AsyncClient]]]


@pytest.fixture
def served(
    clickhouse: Any,
    clickhouse_dsn: str,
    tmp_path: Any,
    publisher: RecordingPublisher,  # noqa: F811
    world: World,  # noqa: F811
) -> Served:
    """The app over the stored world with its lifespan running, and an HTTP client calling it in process (entered
    in the test's own task: the MCP session manager's task group must be left in the task that entered it)."""
    threads = ThreadBook()
    for state in (*world.outputs_a["thread-state"], *world.outputs_b["thread-state"]):
        threads.apply(state.thread_id.encode(), encode_record(state))
    app = make_app(tmp_path, publisher, clickhouse=clickhouse, threads=threads, clickhouse_dsn=clickhouse_dsn)

    @contextlib.asynccontextmanager
    async def serving() -> AsyncIterator[tuple[FastAPI, httpx2.AsyncClient]]:
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url="http://api") as http,
        ):
            yield app, http

    return serving


def connect(http: httpx2.AsyncClient, headers: dict[str, str]) -> Client:
    """An in-memory MCP client of a server whose tools call the app with `headers`' token."""
    token = token_in(headers) if headers else None
    return Client(build_server(RestApi(http, lambda _: token)))


def read_cases(world: World, package_id: str) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:  # noqa: F811
    """(tool, arguments, REST path, REST query) for every read tool."""
    alert = world.outputs_a["alerts"][0].alert_id
    return [
        ("list_projects", {}, "/api/v1/projects", {}),
        ("project_threads", {"project_id": world.project_a}, f"/api/v1/projects/{world.project_a}", {}),
        ("thread_budget", {"thread_id": world.thread_a}, f"/api/v1/threads/{world.thread_a}/context-budget", {}),
        ("list_alerts", {}, "/api/v1/alerts", {}),
        ("list_alerts", {"thread_id": world.thread_a, "status": "opened"}, "/api/v1/alerts", {"status": "opened"}),
        ("open_actions", {"project_id": world.project_a}, "/api/v1/master-actions", {"open": "true"}),
        ("open_actions", {"state": "done"}, "/api/v1/master-actions", {"state": "done"}),
        (
            "thread_handoff_packages",
            {"thread_id": world.thread_a},
            f"/api/v1/threads/{world.thread_a}/handoff-packages",
            {},
        ),
        ("read_handoff_package", {"package_id": package_id}, f"/api/v1/handoff-packages/{package_id}", {}),
        ("ack_alert", {"alert_id": alert}, f"/api/v1/alerts/{alert}/ack", {}),
    ]


async def test_every_read_tool_answers_what_rest_answers_for_the_same_state(served, world, packages) -> None:  # noqa: F811
    headers = user_of(world.project_a)
    async with served() as (_, http), connect(http, headers) as client:
        for tool, arguments, path, query in read_cases(world, packages[0].handoff_package_id):
            method = "POST" if path.endswith("/ack") else "GET"
            rest = await http.request(method, path, params=arguments | query, headers=headers)
            assert rest.status_code in (200, 202), (tool, rest.text)
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, (tool, result.content)
            assert result.structured_content == rest.json(), tool
            assert result.structured_content  # a real answer, not an empty stand-in
        listed = (await http.get("/api/v1/projects", headers=headers)).json()["items"]
    assert [item["project_id"] for item in listed] == [world.project_a]


async def test_the_write_tools_publish_what_the_routes_publish(served, world, publisher, packages) -> None:  # noqa: F811
    headers = user_of(world.project_a)
    action = next(a for a, state in latest_states(world).items() if state == "issued")
    relay = f"thread-relay-{world.tag}"
    async with served() as (_, http), connect(http, headers) as client:
        ack = await client.call_tool("ack_action", {"action_id": action})
        done = await client.call_tool("complete_action", {"action_id": action})
        compact = await client.call_tool("request_compaction", {"thread_id": world.thread_a})
        handoff = await client.call_tool("request_handoff", {"thread_id": world.thread_a, "reason": "spec 8.2"})
        consume = await client.call_tool(
            "consume_handoff_package", {"package_id": packages[0].handoff_package_id, "to_thread_id": relay}
        )
    assert [r.is_error for r in (ack, done, compact, handoff, consume)] == [False] * 5
    assert (ack.structured_content["command"], done.structured_content["command"]) == ("ack", "done")
    assert compact.structured_content == {
        "accepted": True,
        "topic": "session-events",
        "key": world.thread_a,
        "schema_version": 1,
    }
    assert (consume.structured_content["package_status"], consume.structured_content["to_thread_id"]) == (
        "consumed",
        relay,
    )
    assert (handoff.structured_content["requested"], handoff.structured_content["thread_id"]) == (True, world.thread_a)
    request = MasterActionCommand.model_validate_json(publisher.sent[3][2])
    assert (request.action_id, request.command.value, request.note) == (
        handoff.structured_content["action_id"],
        "request",
        "spec 8.2",
    )
    topics = [topic.removeprefix("ctx.") for topic, _, _ in publisher.sent]
    assert topics == [
        "master-action-commands",
        "master-action-commands",
        "session-events",
        "master-action-commands",
        "handoff-packages",
    ]
    assert {key for _, key, _ in publisher.sent} == {world.thread_a.encode()}


async def test_isolation_through_mcp_is_the_apis_401_403_404_with_its_message(served, world, publisher) -> None:  # noqa: F811
    other_action = next(r.action_id for r in world.outputs_b["master-actions"] if r.state.value == "issued")
    async with served() as (_, http):
        async with connect(http, user_of(world.project_a)) as client:
            hidden = await client.call_tool("thread_budget", {"thread_id": world.thread_b})
            not_acked = await client.call_tool("ack_action", {"action_id": other_action})
            not_listed = await client.call_tool("project_threads", {"project_id": world.project_b})
        async with connect(http, bearer(Role.WORKER, "worker-1", world.project_a)) as client:
            worker = await client.call_tool("list_projects", {})
        async with connect(http, {}) as client:
            anonymous = await client.call_tool("list_projects", {})
    assert [r.is_error for r in (hidden, not_acked, not_listed, worker, anonymous)] == [True] * 5
    assert hidden.content[0].text.endswith("404: thread not found")
    assert not_acked.content[0].text.endswith("404: master action not found")
    assert not_listed.content[0].text.endswith("404: project not found")
    assert "403: a worker token may not call this" in worker.content[0].text
    assert anonymous.content[0].text.endswith("401: missing bearer token")
    assert publisher.sent == []


async def test_a_resource_is_the_rest_answer_and_another_projects_is_not_found(served, world) -> None:  # noqa: F811
    headers = user_of(world.project_a)
    async with served() as (_, http), connect(http, headers) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"ctxbudget://projects/{project_id}", "ctxbudget://threads/{thread_id}"}
        thread = await client.read_resource(f"ctxbudget://threads/{world.thread_a}")
        rest = await http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=headers)
        assert thread.contents[0].text == rest.text
        with pytest.raises(MCPError, match="thread not found"):
            await client.read_resource(f"ctxbudget://threads/{world.thread_b}")


async def test_the_mounted_endpoint_wants_the_apis_token_and_serves_the_same_answers(served, world) -> None:  # noqa: F811
    async with served() as (app, http):
        await mounted_endpoint_checks(app, http, world)


async def mounted_endpoint_checks(app: FastAPI, http: httpx2.AsyncClient, world: World) -> None:  # noqa: F811
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for headers, detail in (({}, "missing bearer token"), ({"Authorization": "Bearer forged"}, "invalid bearer token")):
        refused = await http.post(MCP_PATH, json=initialize, headers=headers)
        assert refused.status_code == 401
        assert refused.json() == {"detail": detail}
        assert refused.headers["www-authenticate"] == 'Bearer realm="ctxbudget"'

    headers = user_of(world.project_a)
    mcp_http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://api", headers=headers)
    async with mcp_http, Client(streamable_http_client("http://api/mcp", http_client=mcp_http)) as client:
        result = await client.call_tool("thread_budget", {"thread_id": world.thread_a})
        hidden = await client.call_tool("thread_budget", {"thread_id": world.thread_b})
    rest = await http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=headers)
    assert result.structured_content == rest.json()
    assert hidden.is_error
    assert hidden.content[0].text.endswith("404: thread not found")


async def until(condition: Callable[[], bool], within: float = 10) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - the app's state, no event to wait on
            await asyncio.sleep(0.02)


async def test_a_subscribed_master_hears_its_thread_change_and_may_not_watch_another_project(served, world) -> None:  # noqa: F811
    mine, theirs = f"ctxbudget://threads/{world.thread_a}", f"ctxbudget://threads/{world.thread_b}"
    async with served() as (app, http), connect(http, user_of(world.project_a)) as client:
        for refused in (theirs, f"ctxbudget://projects/{world.project_b}", "file:///etc/passwd"):
            with pytest.raises(MCPError, match="not permitted to watch"):
                async with client.listen(resource_subscriptions=[refused]):
                    pass
        broadcaster = app.state.context.kafka.broadcaster
        async with client.listen(resource_subscriptions=[mine]) as updates:
            await until(lambda: broadcaster.subscriber_count == 1)  # the caller's event stream is followed
            broadcaster.fan_out(
                [
                    client_event(world.project_b, 0, 0, thread_id=world.thread_b),  # not this caller's: never seen
                    client_event(world.project_a, 0, 1, thread_id=world.thread_a),
                ]
            )
            async with asyncio.timeout(10):
                update = await anext(aiter(updates))
        assert update == ResourceUpdated(uri=mine)
        await until(lambda: broadcaster.subscriber_count == 0)  # the stream closed: nothing followed any more


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the era under test
async def test_a_handshake_era_client_subscribes_per_uri_and_hears_the_update_on_its_session(
    served,
    world,  # noqa: F811
    clickhouse,
) -> None:
    """Clients up to MCP 2025-11-25 (`resources/subscribe`): the same gate, the update on their session."""
    mine = f"ctxbudget://projects/{world.project_a}"
    heard: list[str] = []

    async def on_message(message: object) -> None:
        notification = getattr(message, "root", message)
        if isinstance(notification, ResourceUpdatedNotification):
            heard.append(notification.params.uri)

    async with served() as (app, http):
        token = token_in(user_of(world.project_a))
        server = build_server(RestApi(http, lambda _: token))
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            assert client.server_capabilities.resources.subscribe is True
            with pytest.raises(MCPError, match="not permitted to watch"):
                await client.subscribe_resource(f"ctxbudget://projects/{world.project_b}")
            await client.subscribe_resource(mine)
            broadcaster = app.state.context.kafka.broadcaster
            await until(lambda: broadcaster.subscriber_count == 1)
            broadcaster.fan_out([client_event(world.project_a, 0, 0, thread_id=world.thread_a)])
            changed = replaced(project_detail(world.project_a, world.thread_a), {"threads_requiring_handoff": []})
            store(clickhouse, world.tag, "project-risk", [changed])  # the notice waits for a read that shows it
            await until(lambda: heard == [mine])
            await client.unsubscribe_resource(mine)
            await until(lambda: broadcaster.subscriber_count == 0)  # nobody watches: the stream is let go


async def test_a_level_change_is_notified_once_a_read_of_the_thread_shows_it(served, world, clickhouse) -> None:  # noqa: F811
    """Issue 35 item 7: the event reaches the API before the sinks write its change; the notice waits for the read."""
    mine = f"ctxbudget://threads/{world.thread_a}"
    state = world.outputs_a["thread-state"][-1]
    later = state.updated_at + timedelta(minutes=5)
    level = "watch" if state.context_budget_level.value != "watch" else "urgent"
    event = ThreadHandoffRequired(
        event_id=f"ev-level-{world.tag}",
        occurred_at=later,
        project_id=world.project_a,
        thread_id=world.thread_a,
        context_budget_level=level,
    )
    async with served() as (app, http), connect(http, user_of(world.project_a)) as client:
        broadcaster = app.state.context.kafka.broadcaster
        async with client.listen(resource_subscriptions=[mine]) as updates:
            await until(lambda: broadcaster.subscriber_count == 1)
            pending = asyncio.ensure_future(anext(aiter(updates)))
            broadcaster.fan_out([raw_record(0, 0, encode_record(event), world.project_a.encode())])
            done, _ = await asyncio.wait({pending}, timeout=1.0)
            assert not done  # ClickHouse still holds the old state: a notice now would show nothing new
            changed = replaced(state, {"updated_at": later, "context_budget_level": level})
            store(clickhouse, world.tag, "thread-state", [changed])
            async with asyncio.timeout(5):
                assert await pending == ResourceUpdated(uri=mine)
            read = await client.read_resource(mine)
    assert orjson.loads(read.contents[0].text)["context_budget_level"] == level


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the era under test
async def test_the_subscriptions_of_a_connection_end_with_it(served, world) -> None:  # noqa: F811
    """Issue 38 item 9: a client gone without unsubscribing (a DELETE, the idle timeout, a crash) leaves nothing
    followed."""
    async with served() as (app, http):
        token = token_in(user_of(world.project_a))
        broadcaster = app.state.context.kafka.broadcaster
        async with Client(build_server(RestApi(http, lambda _: token)), mode="legacy") as client:
            await client.subscribe_resource(f"ctxbudget://threads/{world.thread_a}")
            await client.subscribe_resource(f"ctxbudget://projects/{world.project_a}")
            await until(lambda: broadcaster.subscriber_count == 1)
        await until(lambda: broadcaster.subscriber_count == 0)
