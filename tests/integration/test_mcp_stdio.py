"""`ctxbudget mcp` as a master agent runs it: a subprocess on stdio, through the SDK's stdio client, calling an API
the test serves under uvicorn on the real broker and ClickHouse. Its answers are the API's, its handoff request lands
on the real `master-action-commands` topic, and a client event on the real `client-events` topic reaches a
subscribed master as a resource update."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.subscriptions import ResourceUpdated

from api.app import create_app
from api.server import running
from api.settings import ApiSettings
from api.topic_reader import open_reader, topic_partitions
from core.settings import Settings
from schemas import MasterActionCommand, ThreadHandoffRequired
from sinks.migrations import migrate
from streams.topic_admin import ensure_topics
from tests.integration.test_api import World, produce, user_of, world  # noqa: F401  (fixture)
from tests.unit.api.fakes import SECRET
from tests.unit.api.test_mcp_server import TOOLS
from tests.unit.sinks.records import at

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]


@pytest.fixture
async def api_url(settings: Settings, clickhouse: Any, world: World) -> AsyncIterator[str]:  # noqa: F811
    """The API under uvicorn on a free port, over the stored world and the test broker."""
    migrate(clickhouse)
    await ensure_topics(settings)
    app = create_app(settings, clickhouse, ApiSettings(sse_heartbeat_seconds=0.5), secret=SECRET)
    async with running(app, "127.0.0.1", 0) as base_url:
        yield base_url


def stdio_server(api_url: str, token_file: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "streams", "mcp", "--api-url", api_url, "--token-file", str(token_file)],
        env={"CTXBUDGET_DATA_DIR": str(token_file.parent)},  # nothing else of the test's CTXBUDGET_* settings
    )


async def commands_on(settings: Settings, count: int) -> list[MasterActionCommand]:
    bootstrap, topic = settings.kafka_bootstrap_servers, settings.topic("master-action-commands")
    reader = await open_reader(bootstrap, topic, await topic_partitions(bootstrap, topic), from_start=True)
    found: list[MasterActionCommand] = []
    try:
        async with asyncio.timeout(30):
            while len(found) < count:
                for batch in (await reader.getmany(timeout_ms=500)).values():
                    found += [MasterActionCommand.model_validate_json(record.value) for record in batch]
    finally:
        await reader.stop()
    return found


async def test_the_stdio_server_answers_what_the_api_answers_and_writes_to_the_real_topics(
    api_url: str,
    settings: Settings,
    world: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    headers = user_of(world.project_a)
    token_file = tmp_path / "token"
    token_file.write_text(headers["Authorization"].removeprefix("Bearer ") + "\n")
    async with Client(stdio_client(stdio_server(api_url, token_file))) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        budget = await client.call_tool("thread_budget", {"thread_id": world.thread_a})
        hidden = await client.call_tool("thread_budget", {"thread_id": world.thread_b})
        handoff = await client.call_tool("request_handoff", {"thread_id": world.thread_a, "reason": "over stdio"})
    async with httpx2.AsyncClient(base_url=api_url, headers=headers) as http:
        rest = await http.get(f"/api/v1/threads/{world.thread_a}/context-budget")
    assert tools == TOOLS
    assert budget.structured_content == rest.json()
    assert hidden.is_error
    assert hidden.content[0].text.endswith("404: thread not found")
    assert not handoff.is_error, handoff.content
    [command] = await commands_on(settings, 1)
    assert (command.action_id, command.thread_id, command.note) == (
        handoff.structured_content["action_id"],
        world.thread_a,
        "over stdio",
    )


async def test_a_client_event_on_the_broker_reaches_a_master_subscribed_over_stdio(
    api_url: str,
    settings: Settings,
    world: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(user_of(world.project_a)["Authorization"].removeprefix("Bearer "))
    uri = f"ctxbudget://threads/{world.thread_a}"
    async with (
        Client(stdio_client(stdio_server(api_url, token_file))) as client,
        client.listen(resource_subscriptions=[uri]) as updates,
    ):
        pending = asyncio.ensure_future(anext(aiter(updates)))
        async with asyncio.timeout(60):
            for n in range(1000):  # until the server's event stream is open: no replay before it is
                event = ThreadHandoffRequired(
                    event_id=f"ev-stdio-{world.tag}-{n}",
                    occurred_at=at(n),
                    project_id=world.project_a,
                    thread_id=world.thread_a,
                    context_budget_level="urgent",
                )
                await produce(settings, "client-events", [(world.project_a.encode(), event)])
                done, _ = await asyncio.wait({pending}, timeout=0.5)
                if done:
                    break
        assert pending.result() == ResourceUpdated(uri=uri)
