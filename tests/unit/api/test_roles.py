"""Each endpoint x each role: a role the route does not name is 403 with a message, before any read or write.

Roles (api/deps.py): a worker reports and posts its threads' handoff packages; a user reads and acks within its
projects; an operator may call everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.tokens import Role
from tests.samples import HANDOFF_READY, SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import EmptyDatabase, RecordingPublisher, bearer, make_app

COMPACTION_EVENT = {
    "type": "compaction_completed",
    "thread_id": "thread-abc",
    "event_id": "compaction-1",
    "occurred_at": datetime.now(UTC).isoformat(),
    "project_id": "proj-001",
    "trigger_mode": "request_start",
}
TOKENS = {
    Role.WORKER: bearer(Role.WORKER, "worker-mac-01", "proj-001"),
    Role.USER: bearer(Role.USER, "kris", "proj-001"),
    Role.OPERATOR: bearer(Role.OPERATOR, "ops"),
}
READER = {Role.USER, Role.OPERATOR}
REPORTER = {Role.WORKER, Role.OPERATOR}
EVERYONE = set(Role)
OPERATOR = {Role.OPERATOR}
CONVERSATION = dumps(
    {
        "conversation_id": "conv-1",
        "conversation_type": "master_agent",
        "project_id": "proj-001",
        "project_title": "master",
        "thread_ids": ["thread-abc"],
        "updated_at": "2026-03-25T08:00:00Z",
    }
)
POLICY = dumps({"project_id": "proj-001", "safe_min_pct": 80, "watch_min_pct": 60, "urgent_min_pct": 30})
ENDPOINTS = [
    # method, url, body, roles allowed, the answer an allowed role gets from an empty database
    ("POST", "/api/v1/workers/worker-mac-01/thread-context", dumps(SPEC_REPORT_REQUEST), REPORTER, 200),
    ("POST", "/api/v1/workers/worker-mac-01/session-events", dumps(COMPACTION_EVENT), REPORTER, 202),
    ("POST", "/api/v1/threads/thread-abc/handoff-packages", dumps(HANDOFF_READY), REPORTER, 202),
    ("GET", "/api/v1/conversations", None, READER, 200),
    ("GET", "/api/v1/projects/proj-001", None, READER, 404),
    ("GET", "/api/v1/projects/proj-001/relay-schedule", None, READER, 404),  # issue 37
    # issue 23: a worker reads the threads it reports (its hooks ask what they owe) and resumes from their packages
    ("GET", "/api/v1/threads/thread-abc/context-budget", None, EVERYONE, 404),
    ("POST", "/api/v1/alerts/alert-1/ack", None, READER, 404),
    ("GET", "/api/v1/events", None, READER, None),  # an allowed caller gets a stream that never ends: not called
    (
        "POST",
        "/api/v1/sql",
        b"SELECT 1",
        {Role.OPERATOR},
        None,
    ),  # runs on real ClickHouse: tests/integration/test_sql.py
    # issue 21: the master's routes
    ("GET", "/api/v1/projects", None, READER, 200),
    ("GET", "/api/v1/alerts", None, READER, 200),
    ("GET", "/api/v1/master-actions", None, EVERYONE, 200),  # a worker lists its own threads' actions
    ("POST", "/api/v1/master-actions/act-1/ack", None, EVERYONE, 404),  # a worker acks its own threads' actions
    ("POST", "/api/v1/master-actions/act-1/done", None, EVERYONE, 404),
    ("GET", "/api/v1/handoff-packages/hp-1", None, EVERYONE, 404),
    ("GET", "/api/v1/threads/thread-abc/handoff-packages", None, READER, 200),
    ("POST", "/api/v1/handoff-packages/hp-1/consume", dumps({"to_thread_id": "thread-relay"}), EVERYONE, 404),
    ("POST", "/api/v1/threads/thread-abc/compaction-requests", None, READER, 404),
    ("POST", "/api/v1/threads/thread-abc/handoff-requests", None, READER, 404),
    ("PUT", "/api/v1/conversations/conv-1", CONVERSATION, OPERATOR, 202),
    ("PUT", "/api/v1/projects/proj-001/threshold-policy", POLICY, OPERATOR, 202),
    ("PUT", "/api/v1/threads/thread-abc/task-importance", dumps({"task_importance": 5}), READER, 404),
    ("PUT", "/api/v1/threads/thread-abc/worker", dumps({"worker_id": "worker-2", "reason": "moved"}), OPERATOR, 404),
    # issue 37: the relay analytics the web page plots
    ("GET", "/api/v1/analytics/relay", None, READER, 200),
    ("GET", "/api/v1/threads/thread-abc/timeline", None, READER, 404),
    ("GET", "/api/v1/compaction-points", None, READER, 200),  # issue 37: the fleet's learnt points
]
CASES = [
    pytest.param(method, url, body, role, role in allowed, answer, id=f"{method} {url} as {role.value}")
    for method, url, body, allowed, answer in ENDPOINTS
    for role in Role
    if not (role in allowed and answer is None)
]


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, publisher, clickhouse=EmptyDatabase())) as client:
        yield client


@pytest.mark.parametrize(("method", "url", "body", "role", "allowed", "answer"), CASES)
def test_each_endpoint_answers_each_role(
    client, publisher, method: str, url: str, body: bytes | None, role: Role, allowed: bool, answer: int | None
) -> None:
    response = client.request(method, url, content=body, headers=TOKENS[role])
    if allowed:
        assert response.status_code == answer
    else:
        assert response.status_code == 403
        assert role.value in response.json()["detail"]
        assert publisher.sent == []


def test_every_api_route_declares_its_roles(tmp_path, publisher) -> None:
    """A route added without `require(...)` would let every role in: each one must name its roles."""
    app = make_app(tmp_path, publisher)
    included = (getattr(getattr(r, "original_router", None), "routes", [r]) for r in app.routes)
    routes = [r for group in included for r in group if isinstance(r, APIRoute) and r.path.startswith("/api/")]
    undeclared = [route.path for route in routes if not any(_is_role_check(d) for d in _dependencies(route.dependant))]
    assert routes
    assert undeclared == []
    assert len({(m, r.path) for r in routes for m in r.methods}) == len(ENDPOINTS)  # and each one is in the table


def _dependencies(dependant: Dependant) -> Iterator[Dependant]:
    for dependency in dependant.dependencies:
        yield dependency
        yield from _dependencies(dependency)


def _is_role_check(dependant: Dependant) -> bool:
    return getattr(dependant.call, "__qualname__", "") == "require.<locals>.authorized"
