"""The HTTP API on the real stores: ClickHouse read models written by the sink writer, and a real Kafka broker.

The first part serves rows written through `sinks.tables` + `sinks.writer` (the sinks' own path) with a recording
publisher in place of Kafka; the second part runs the app under uvicorn against the test broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from aiokafka import AIOKafkaProducer
from fastapi.testclient import TestClient

from api.app import create_app
from api.server import running
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.tokens import Role
from api.topic_reader import open_reader, topic_partitions
from core.engine_config import EngineConfig
from core.levels import classify_level
from core.settings import Settings
from schemas import (
    DEFAULT_POLICY,
    AlertCommand,
    Codec,
    Conversation,
    ConversationItem,
    HandoffPackage,
    MasterAction,
    MasterActionRecord,
    Record,
    ThreadContextSnapshot,
    ThreadHandoffRequired,
    ThresholdPolicy,
)
from schemas.codec import encode_record
from sinks.batcher import Batcher
from sinks.migrations import migrate
from sinks.tables import ROUTES
from sinks.writer import write_batch
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.indicators import conversation_item
from streams.aggregates.risk import apply_thread_state
from streams.aggregates.routes import shown_thread
from streams.engine.fold import apply_handoff, apply_snapshot
from streams.topic_admin import ensure_topics
from tests.samples import HANDOFF_READY, SPEC_CONVERSATION_ITEM, SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import SECRET, RecordingPublisher, bearer, make_app
from tests.unit.engine.builders import package, snapshot
from tests.unit.sinks.records import at, compaction, engine_outputs, project_detail

pytestmark = pytest.mark.clickhouse

VERSIONS = itertools.count(1)
"""Kafka offsets stand in for versions in the latest-state tables: rising across the session, a later write wins."""


def store(client: Any, tag: str, topic: str, records: list[Record]) -> None:
    """Write records the way the sinks do: rows from `sinks.tables` specs, inserted with dedup tokens."""
    batcher = Batcher(ROUTES[topic], f"t{tag}.{topic}", 0)
    flushes = [flush for record in records for flush in batcher.add(next(VERSIONS), record)] + batcher.flush()
    for flush in flushes:
        for batch in flush.batches:
            write_batch(client, batch.table, batch.rows, batch.token)


def conversation(conversation_id: str, project: str, *, pinned: bool, reply_minute: int | None) -> ConversationItem:
    item = ConversationItem.model_validate_json(dumps({**SPEC_CONVERSATION_ITEM, "project_id": project}))
    return item.model_copy(
        update={
            "conversation_id": conversation_id,
            "manual_pinned": pinned,
            "latest_reply_at": None if reply_minute is None else at(60 * reply_minute),
        }
    )


@dataclass(frozen=True)
class World:
    """Two projects, each with one thread that ran from safe to critical with a package, and conversations."""

    tag: str
    project_a: str
    project_b: str
    thread_a: str
    thread_b: str
    outputs_a: dict[str, list[Record]]
    outputs_b: dict[str, list[Record]]
    conversations_a: list[ConversationItem]


@pytest.fixture
def world(clickhouse: Any) -> World:
    migrate(clickhouse)
    tag = uuid.uuid4().hex[:8]
    project_a, project_b = f"proj-a-{tag}", f"proj-b-{tag}"
    thread_a, thread_b = f"thread-a-{tag}", f"thread-b-{tag}"
    outputs_a, outputs_b = engine_outputs(thread_a, project_a), engine_outputs(thread_b, project_b)
    for outputs in (outputs_a, outputs_b):
        for topic in ("thread-state", "alerts", "master-actions"):
            store(clickhouse, tag, topic, outputs[topic])
    store(clickhouse, tag, "compactions", [compaction(thread_a, project_a)])
    store(clickhouse, tag, "project-risk", [project_detail(project_a, thread_a), project_detail(project_b, thread_b)])
    layout = [(True, 5), (False, 9), (False, None), (True, 7), (False, 9), (False, 1), (True, None)]
    conversations_a = [
        conversation(f"conv-{i}-{tag}", project_a, pinned=pinned, reply_minute=minute)
        for i, (pinned, minute) in enumerate(layout)
    ]
    store(
        clickhouse,
        tag,
        "conversation-indicators",
        [*conversations_a, conversation(f"conv-b-{tag}", project_b, pinned=True, reply_minute=3)],
    )
    return World(tag, project_a, project_b, thread_a, thread_b, outputs_a, outputs_b, conversations_a)


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def http(
    clickhouse: Any, clickhouse_dsn: str, tmp_path: Any, publisher: RecordingPublisher, world: World
) -> Iterator[TestClient]:
    threads = ThreadBook()  # as the API's reader of thread-state fills it
    for state in (*world.outputs_a["thread-state"], *world.outputs_b["thread-state"]):
        threads.apply(state.thread_id.encode(), encode_record(state))
    with TestClient(
        make_app(tmp_path, publisher, clickhouse=clickhouse, threads=threads, clickhouse_dsn=clickhouse_dsn)
    ) as client:
        yield client


def user_of(project: str) -> dict[str, str]:
    return bearer(Role.USER, "kris", project)


def list_order(items: list[ConversationItem]) -> list[str]:
    """Spec 6.1's order computed independently: pinned first, then the latest reply first (none last), then id."""
    ordered = sorted(
        items,
        key=lambda c: (
            not c.manual_pinned,
            c.latest_reply_at is None,
            -(c.latest_reply_at.timestamp() if c.latest_reply_at else 0),
            c.conversation_id,
        ),
    )
    return [c.conversation_id for c in ordered]


def test_the_conversation_list_is_the_callers_projects_in_the_spec_order_and_shape(http, world) -> None:
    answer = http.get("/api/v1/conversations", headers=user_of(world.project_a))
    assert answer.status_code == 200
    items = answer.json()["items"]
    assert [i["conversation_id"] for i in items] == list_order(world.conversations_a)
    assert set(SPEC_CONVERSATION_ITEM) | {
        "context_budget_source_node_id",
        "context_budget_updated_at",
    } <= set(items[0])
    assert items[0]["context_budget_indicator"] == {
        **SPEC_CONVERSATION_ITEM["context_budget_indicator"],
        "stale": False,
        "schema_version": 1,
    }
    assert answer.json()["next_cursor"] is None


def test_paging_by_cursor_visits_every_conversation_once_in_order(http, world) -> None:
    seen, cursor = [], None
    while True:
        query = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = http.get("/api/v1/conversations", params=query, headers=user_of(world.project_a)).json()
        seen += [item["conversation_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list_order(world.conversations_a)


def test_an_operator_lists_every_project(http, world) -> None:
    answer = http.get("/api/v1/conversations", params={"limit": 500}, headers=bearer(Role.OPERATOR, "ops"))
    projects = {item["project_id"] for item in answer.json()["items"]}
    assert {world.project_a, world.project_b} <= projects


def test_the_project_detail_is_the_stored_view_and_hidden_from_other_projects(http, world) -> None:
    answer = http.get(f"/api/v1/projects/{world.project_a}", headers=user_of(world.project_a))
    assert answer.status_code == 200
    stored = project_detail(world.project_a, world.thread_a).model_dump(mode="json")
    no_report = {"agent_tool": None, "model": None, "shown_remaining_pct": None}  # the world stores no snapshot
    shown = [thread | no_report for thread in stored["active_thread_contexts"]]
    assert answer.json() == stored | {"active_thread_contexts": shown}
    for project in (world.project_b, f"proj-unknown-{world.tag}"):
        hidden = http.get(f"/api/v1/projects/{project}", headers=user_of(world.project_a))
        assert hidden.status_code == 404
        assert world.project_b not in hidden.text
    assert http.get(f"/api/v1/projects/{world.project_b}", headers=bearer(Role.OPERATOR, "ops")).status_code == 200


def test_the_thread_budget_is_the_engines_state_with_checklist_and_history(http, world) -> None:
    answer = http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=user_of(world.project_a))
    assert answer.status_code == 200
    body = answer.json()
    state = world.outputs_a["thread-state"][-1]
    assert body["context_budget_level"] == state.context_budget_level
    assert body["context_budget_remaining_pct"] == pytest.approx(state.context_budget_remaining_pct)
    assert body["must_finish_before_compaction"] is state.must_finish_before_compaction
    assert body["handoff_package_status"] == (state.handoff.package_status if state.handoff else None)
    assert body["pending_master_actions"] == [item.action for item in state.master_actions if item.open]
    assert body["wrap_up_checklist"] == state.wrap_up_checklist.model_dump(mode="json")
    assert body["wrap_up_checklist"]["files"]  # the engine's checklist, not a blank default
    assert body["compaction_history"]["compaction_count"] == 1
    assert body["compaction_history"]["recent"][0]["event_id"] == f"cc-{world.thread_a}"


def test_another_projects_thread_is_404_like_an_unknown_one(http, world) -> None:
    for thread in (world.thread_b, f"thread-unknown-{world.tag}"):
        answer = http.get(f"/api/v1/threads/{thread}/context-budget", headers=user_of(world.project_a))
        assert answer.status_code == 404
        assert answer.json() == {"detail": "thread not found"}


@pytest.mark.parametrize(
    "hostile",
    ["x'||(SELECT(1))||'", "a;DROP_TABLE_thread_context_latest", "{thread_id:String}", "\\'", "%27--", "..%2F..%2Fetc"],
)
def test_injection_strings_in_ids_are_just_unknown_ids(http, world, clickhouse, hostile: str) -> None:
    operator = bearer(Role.OPERATOR, "ops")
    for url in (
        f"/api/v1/threads/{hostile}/context-budget",
        f"/api/v1/projects/{hostile}",
        f"/api/v1/alerts/{hostile}/ack",
    ):
        method = "POST" if url.endswith("/ack") else "GET"
        assert http.request(method, url, headers=operator).status_code == 404, url
    assert http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=operator).status_code == 200


def test_an_ack_names_the_alerts_thread_and_the_caller_and_is_keyed_by_alert(http, world, publisher) -> None:
    alert = world.outputs_a["alerts"][0]
    answer = http.post(f"/api/v1/alerts/{alert.alert_id}/ack", headers=user_of(world.project_a))
    assert answer.status_code == 202
    [(topic, key, value)] = publisher.sent
    command = Codec(AlertCommand).decode(value)
    assert (topic, key) == ("ctx.alert-commands", alert.alert_id.encode())
    assert (command.thread_id, command.issued_by, command.command) == (alert.thread_id, "kris", "ack")


def test_another_projects_alert_cannot_be_acked(http, world, publisher) -> None:
    alert = world.outputs_b["alerts"][0]
    assert http.post(f"/api/v1/alerts/{alert.alert_id}/ack", headers=user_of(world.project_a)).status_code == 404
    assert publisher.sent == []


def test_a_handoff_package_goes_to_its_thread_and_never_onto_another_projects_thread(http, world, publisher) -> None:
    now = datetime.now(UTC).isoformat()  # newer than the thread's current package, so the engine would keep it
    own = {**HANDOFF_READY, "project_id": world.project_a, "from_thread_id": world.thread_a}
    own |= {"handoff_package_id": f"hp-{world.tag}", "created_at": now, "ready_at": now}
    url = f"/api/v1/threads/{world.thread_a}/handoff-packages"
    worker = bearer(Role.WORKER, world.outputs_a["thread-state"][0].worker_id, world.project_a)
    assert http.post(url, content=dumps(own), headers=worker).status_code == 202
    [(topic, key, value)] = publisher.sent
    assert (topic, key) == ("ctx.handoff-packages", world.thread_a.encode())
    assert Codec(HandoffPackage).decode(value).from_thread_id == world.thread_a

    hijack = {**own, "from_thread_id": world.thread_b}  # B's thread, labelled with A's project
    url = f"/api/v1/threads/{world.thread_b}/handoff-packages"
    assert http.post(url, content=dumps(hijack), headers=worker).status_code == 403
    assert len(publisher.sent) == 1


# -- on the real broker ---------------------------------------------------------------------------------------------

STRICT = ThresholdPolicy(project_id="proj-001", safe_min_pct=90.0, watch_min_pct=70.0, urgent_min_pct=50.0)


async def produce(settings: Settings, topic: str, records: list[tuple[bytes, Record]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for key, record in records:
            await producer.send_and_wait(settings.topic(topic), encode_record(record), key=key)
    finally:
        await producer.stop()


@pytest.fixture
async def live_api(settings: Settings, clickhouse: Any) -> AsyncIterator[str]:
    """The app under uvicorn on a free port, with a project policy already on `policies`."""
    migrate(clickhouse)
    await ensure_topics(settings)
    await produce(settings, "policies", [(b"proj-001", STRICT)])
    app = create_app(settings, clickhouse, ApiSettings(sse_heartbeat_seconds=0.5), secret=SECRET)
    async with running(app, "127.0.0.1", 0) as base_url:
        yield base_url


@pytest.mark.kafka
async def test_a_report_lands_on_snapshots_and_the_answer_is_the_engines_level(live_api, settings) -> None:
    worker = bearer(Role.WORKER, "worker-mac-01", "proj-001")
    percents = [95, 80, 55, 37, 10]
    async with httpx.AsyncClient(base_url=live_api, headers=worker) as client:
        for version, pct in enumerate(percents, start=1):
            body = dumps({**SPEC_REPORT_REQUEST, "context_budget_remaining_pct": pct})
            headers = {"Idempotency-Key": f"snap-{version}", "X-Snapshot-Version": str(version)}
            answer = await client.post("/api/v1/workers/worker-mac-01/thread-context", content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["context_budget_level"] == classify_level(pct, STRICT)  # the project's policy

    bootstrap, topic = settings.kafka_bootstrap_servers, settings.topic("snapshots")
    reader = await open_reader(bootstrap, topic, await topic_partitions(bootstrap, topic), from_start=True)
    try:
        records = []
        async with asyncio.timeout(30):
            while len(records) < len(percents):
                for batch in (await reader.getmany(timeout_ms=500)).values():
                    records += batch
    finally:
        await reader.stop()
    assert {record.key for record in records} == {b"thread-abc"}
    snapshots = sorted(
        (Codec(ThreadContextSnapshot).decode(r.value) for r in records), key=lambda s: s.snapshot_version
    )
    assert [(s.snapshot_id, s.context_budget_remaining_pct) for s in snapshots] == [
        (f"snap-{v}", pct) for v, pct in enumerate(percents, start=1)
    ]


@pytest.mark.kafka
async def test_a_thread_known_on_thread_state_cannot_be_reported_into_another_project(
    settings: Settings, clickhouse: Any
) -> None:
    """Issue 20.1 against the real topics: the API reads thread-state at start, so B's thread refuses A's report."""
    migrate(clickhouse)
    await ensure_topics(settings)
    tag = uuid.uuid4().hex[:8]
    thread, owner, attacker = f"thread-{tag}", f"proj-b-{tag}", f"proj-a-{tag}"
    [state] = engine_outputs(thread, owner)["thread-state"][:1]
    await produce(settings, "thread-state", [(thread.encode(), state)])
    app = create_app(settings, clickhouse, ApiSettings(), secret=SECRET)
    body = dumps({**SPEC_REPORT_REQUEST, "thread_id": thread, "project_id": attacker, "worker_id": state.worker_id})
    url = f"/api/v1/workers/{state.worker_id}/thread-context"
    async with running(app, "127.0.0.1", 0) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        answer = await client.post(url, content=body, headers=bearer(Role.WORKER, state.worker_id, attacker))
    assert answer.status_code == 403, answer.text
    assert "another project" in answer.json()["detail"]


def test_every_instant_a_read_returns_is_utc_with_z(http, world) -> None:
    """Issue 19.13: one rule for every instant, whichever table or JSON column it comes from."""
    operator = bearer(Role.OPERATOR, "ops")
    urls = [
        "/api/v1/conversations",
        f"/api/v1/projects/{world.project_a}",
        f"/api/v1/threads/{world.thread_a}/context-budget",
    ]
    instants = []
    for url in urls:
        answer = http.get(url, headers=operator)
        assert answer.status_code == 200, url
        instants += [(url, text) for text in _strings(answer.json()) if INSTANT.match(text)]
    assert {url for url, _ in instants} == set(urls)  # each endpoint returned some
    assert [(url, text) for url, text in instants if not text.endswith("Z")] == []


INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, str]]:
    """Dispatched events (those with data) of an SSE stream, as their fields."""
    fields: dict[str, str] = {}
    async for line in lines:
        if not line:
            if "data" in fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def handoff_required(project: str, n: int) -> tuple[bytes, Record]:
    event = ThreadHandoffRequired(
        event_id=f"ev-{project}-{n}",
        occurred_at=at(n),
        project_id=project,
        thread_id="t",
        context_budget_level="urgent",
    )
    return project.encode(), event


@contextlib.asynccontextmanager
async def subscribed(client: httpx.AsyncClient, project: str, last_event_id: str | None = None):
    headers = user_of(project) | ({"Last-Event-ID": last_event_id} if last_event_id else {})
    async with client.stream("GET", "/api/v1/events", headers=headers) as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("retry:")  # the opening frame: subscribed from here on
        yield sse_events(lines)


async def take(events: AsyncIterator[dict[str, str]], count: int) -> list[dict[str, str]]:
    async with asyncio.timeout(30):
        return [await anext(events) for _ in range(count)]


@pytest.mark.kafka
async def test_sse_clients_see_only_their_projects_and_resume_by_last_event_id_without_gaps(live_api, settings) -> None:
    a, b = "proj-sse-a", "proj-sse-b"
    async with httpx.AsyncClient(base_url=live_api, timeout=30) as client:
        async with subscribed(client, a) as events_a, subscribed(client, b) as events_b:
            await produce(settings, "client-events", [handoff_required(p, n) for n in range(3) for p in (a, b)])
            first = await take(events_a, 1)
            seen_b = await take(events_b, 3)
        assert [e["event"] for e in first] == ["thread.handoff.required"]
        assert all(f'"project_id":"{b}"' in e["data"] for e in seen_b)

        await produce(settings, "client-events", [handoff_required(a, 3), handoff_required(b, 3)])
        async with subscribed(client, a, last_event_id=first[0]["id"]) as resumed:
            await produce(settings, "client-events", [handoff_required(a, 4)])
            rest = await take(resumed, 4)
    ids = [e["data"].split('"event_id":"')[1].split('"')[0] for e in first + rest]
    assert ids == [f"ev-{a}-{n}" for n in range(5)]


# -- fuzzing the OpenAPI document ----------------------------------------------------------------------------------


def test_no_generated_request_makes_the_api_fail(
    clickhouse: Any, clickhouse_dsn: str, tmp_path: Any, world: World
) -> None:
    """Schemathesis cases for every operation of the OpenAPI document (SSE aside: an endless stream, tested above)."""
    app = make_app(tmp_path, RecordingPublisher(), clickhouse=clickhouse, clickhouse_dsn=clickhouse_dsn)
    operator = bearer(Role.OPERATOR, "ops")
    with TestClient(app):  # the lifespan runs: its context lives on the app object schemathesis calls
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]
        for operation in operations:
            if operation.path == "/api/v1/events":
                continue

            @hypothesis.settings(max_examples=40, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
            @hypothesis.given(case=operation.as_strategy())
            def no_server_error(case: Any) -> None:
                response = case.call(headers=operator)
                assert response.status_code < 500, (case.method, case.formatted_path, response.text)

            no_server_error()
    # issue 21's thirteen, session events, the worker move, issue 37's two analytics reads, the relay schedule and
    # the compaction points
    assert len(operations) == 27


@pytest.mark.parametrize("pct", [59.999999, 39.9999, 24.99999])
def test_the_three_surfaces_agree_on_a_percent_just_below_a_band_edge(http, clickhouse, pct: float) -> None:
    """Spec 9.6: the home ring, the project detail and the thread page show one value and one level."""
    migrate(clickhouse)
    tag = uuid.uuid4().hex[:8]
    project, thread, conversation_id = f"proj-{tag}", f"thread-{tag}", f"conv-{tag}"
    step = apply_snapshot(None, snapshot(pct, thread=thread, project=project), DEFAULT_POLICY, at(0), EngineConfig())
    state = step.slot.state
    risk = apply_thread_state(None, state, at(0), ProjectsConfig())
    registry = Conversation(
        conversation_id=conversation_id,
        conversation_type="single_device",
        project_id=project,
        project_title="edge",
        thread_ids=[thread],
        updated_at=at(0),
    )
    store(clickhouse, tag, "thread-state", [state])
    store(clickhouse, tag, "project-risk", [e.record for e in risk.emits if e.topic == "project-risk"])
    store(clickhouse, tag, "conversation-indicators", [conversation_item(registry, shown_thread(state))])
    headers = user_of(project)

    [item] = http.get("/api/v1/conversations", headers=headers).json()["items"]
    [listed] = http.get(f"/api/v1/projects/{project}", headers=headers).json()["active_thread_contexts"]
    page = http.get(f"/api/v1/threads/{thread}/context-budget", headers=headers).json()
    ring = item["context_budget_indicator"]
    assert listed["context_budget_remaining_pct"] == page["context_budget_remaining_pct"] == pct
    assert ring["percent"] == math.floor(page["context_budget_remaining_pct"])
    assert ring["level"] == listed["context_budget_level"] == page["context_budget_level"] == classify_level(pct)


def test_the_thread_page_says_why_the_engine_demoted_a_package(http, clickhouse) -> None:
    migrate(clickhouse)
    tag = uuid.uuid4().hex[:8]
    project, thread = f"proj-{tag}", f"thread-{tag}"
    config = EngineConfig()
    slot = apply_snapshot(None, snapshot(30, thread=thread, project=project), DEFAULT_POLICY, at(0), config).slot
    bare = package("ready", thread=thread, complete=False).model_copy(
        update={"project_id": project, "summary_text": ""}
    )
    state = apply_handoff(slot, bare, at(1), config).slot.state
    store(clickhouse, tag, "thread-state", [state])
    page = http.get(f"/api/v1/threads/{thread}/context-budget", headers=user_of(project)).json()
    assert (page["handoff_package_status"], page["handoff_decision_package_id"]) == ("draft", "hp-1")
    assert "summary_text" in page["handoff_decision_reason"]


def test_the_checklist_shown_is_the_current_one_not_the_newest_action_rows(http, world, clickhouse) -> None:
    """A compact_now action (no checklist) issued after the wrap-up must not blank the thread page's checklist."""
    state = world.outputs_a["thread-state"][-1]
    compact_now = MasterActionRecord(
        action_id=f"{world.thread_a}:compact_now:x",
        thread_id=world.thread_a,
        project_id=world.project_a,
        context_budget_level=state.context_budget_level,
        actions=[MasterAction.COMPACT_NOW],
        issued_at=at(3_600),
    )
    store(clickhouse, world.tag, "master-actions", [compact_now])
    page = http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=user_of(world.project_a)).json()
    assert page["wrap_up_checklist"] == state.wrap_up_checklist.model_dump(mode="json")
    assert page["wrap_up_checklist"]["files"] == ["a.py"]  # the package's critical files
