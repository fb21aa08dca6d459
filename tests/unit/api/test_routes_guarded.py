"""Every route refuses a bad caller or bad input before it touches the database or Kafka; OpenAPI is served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.tokens import Role
from tests.samples import HANDOFF_READY, dumps
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app

USER = bearer(Role.USER, "kris", "proj-001")
WORKER = bearer(Role.WORKER, "worker-mac-01", "proj-001")
READS = [
    ("GET", "/api/v1/conversations"),
    ("GET", "/api/v1/projects/proj-001"),
    ("GET", "/api/v1/threads/thread-abc/context-budget"),
    ("GET", "/api/v1/events"),
    ("POST", "/api/v1/alerts/alert-1/ack"),
    ("POST", "/api/v1/threads/thread-abc/handoff-packages"),
    ("POST", "/api/v1/sql"),
    ("GET", "/api/v1/threads/thread-abc/handoff-packages"),
    ("GET", "/api/v1/alerts"),
    ("GET", "/api/v1/projects"),
    ("PUT", "/api/v1/conversations/conv-1"),
    ("PUT", "/api/v1/projects/proj-001/threshold-policy"),
    ("POST", "/api/v1/threads/thread-abc/compaction-requests"),
    ("GET", "/api/v1/master-actions"),
    ("POST", "/api/v1/master-actions/act-1/ack"),
    ("POST", "/api/v1/master-actions/act-1/done"),
    ("GET", "/api/v1/handoff-packages/hp-1"),
    ("POST", "/api/v1/handoff-packages/hp-1/consume"),
    ("GET", "/api/v1/compaction-points"),
]


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, publisher)) as client:  # its database fails the test when queried
        yield client


@pytest.mark.parametrize(("method", "url"), READS)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer x.y.z"}], ids=["missing", "malformed"])
def test_every_route_answers_401_without_a_valid_token(client, method: str, url: str, headers) -> None:
    assert client.request(method, url, headers=headers).status_code == 401


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/projects/proj%20001",
        "/api/v1/projects/" + "p" * 129,
        "/api/v1/threads/'%20OR%201=1%20--/context-budget",
        "/api/v1/threads/a%0Ab/context-budget",
    ],
)
def test_an_id_with_whitespace_or_too_long_is_422(client, url: str) -> None:
    assert client.get(url, headers=USER).status_code == 422


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/master-actions?state=nonsense",
        "/api/v1/master-actions?limit=501",
        "/api/v1/master-actions?thread_id=a%20b",
        "/api/v1/alerts?status=closed",
        "/api/v1/alerts?project_id=" + "p" * 129,
    ],
)
def test_bad_master_filters_are_422_before_the_database(client, url: str) -> None:
    assert client.get(url, headers=USER).status_code == 422


def test_a_consume_without_a_relay_thread_is_422_before_the_database(client, publisher) -> None:
    answer = client.post("/api/v1/handoff-packages/hp-1/consume", json={"to": "x"}, headers=USER)
    assert answer.status_code == 422
    assert publisher.sent == []


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=ten", "cursor=not-a-cursor", "cursor=WyJ4Il0", "cursor=" + "A" * 600]
)
def test_bad_paging_parameters_are_422(client, query: str) -> None:
    assert client.get(f"/api/v1/conversations?{query}", headers=USER).status_code == 422


@pytest.mark.parametrize("last_event_id", ["0:1;1:2", "garbage", "0:-1"])
def test_a_malformed_last_event_id_is_422(client, last_event_id: str) -> None:
    answer = client.get("/api/v1/events", headers={**USER, "Last-Event-ID": last_event_id})
    assert answer.status_code == 422


def test_a_handoff_package_for_another_thread_than_the_path_is_422(client, publisher) -> None:
    body = dumps({**HANDOFF_READY, "from_thread_id": "thread-other"})
    answer = client.post("/api/v1/threads/thread-abc/handoff-packages", content=body, headers=WORKER)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "from_thread_id"]
    assert publisher.sent == []


def test_an_oversized_handoff_package_is_413(tmp_path, publisher) -> None:
    from api.settings import ApiSettings

    with TestClient(make_app(tmp_path, publisher, api=ApiSettings(max_package_bytes=512))) as client:
        answer = client.post(
            "/api/v1/threads/thread-abc/handoff-packages", content=dumps(HANDOFF_READY), headers=WORKER
        )
    assert answer.status_code == 413


def test_the_openapi_document_describes_every_route_and_the_validated_bodies(client) -> None:
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) == {
        "/api/v1/workers/{worker_id}/thread-context",
        "/api/v1/workers/{worker_id}/session-events",
        "/api/v1/conversations",
        "/api/v1/projects/{project_id}",
        "/api/v1/projects/{project_id}/relay-schedule",
        "/api/v1/threads/{thread_id}/context-budget",
        "/api/v1/threads/{thread_id}/handoff-packages",
        "/api/v1/alerts/{alert_id}/ack",
        "/api/v1/events",
        "/api/v1/sql",
        "/api/v1/alerts",
        "/api/v1/projects",
        "/api/v1/conversations/{conversation_id}",
        "/api/v1/projects/{project_id}/threshold-policy",
        "/api/v1/threads/{thread_id}/compaction-requests",
        "/api/v1/threads/{thread_id}/handoff-requests",
        "/api/v1/master-actions",
        "/api/v1/master-actions/{action_id}/ack",
        "/api/v1/master-actions/{action_id}/done",
        "/api/v1/handoff-packages/{package_id}",
        "/api/v1/handoff-packages/{package_id}/consume",
        "/api/v1/threads/{thread_id}/task-importance",
        "/api/v1/threads/{thread_id}/worker",
        "/api/v1/analytics/relay",
        "/api/v1/threads/{thread_id}/timeline",
        "/api/v1/compaction-points",
    }
    report = document["paths"]["/api/v1/workers/{worker_id}/thread-context"]["post"]
    assert report["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/WorkerReportRequest")
    posted = document["paths"]["/api/v1/workers/{worker_id}/session-events"]["post"]
    one, many = posted["requestBody"]["content"]["application/json"]["schema"]["anyOf"]
    assert one["$ref"].endswith("/SessionEvent")
    assert many["items"]["$ref"].endswith("/SessionEvent")
    schemas = document["components"]["schemas"]
    assert schemas["SessionEvent"]["discriminator"]["propertyName"] == "type"
    assert {
        "WorkerReportRequest",
        "WorkerReportResponse",
        "HandoffPackage",
        "ConversationPage",
        "ProjectContextView",  # the spec's ProjectDetail with each thread's agent tool
    } <= set(schemas)
    assert schemas["WorkerReportRequest"]["properties"]["source_kind"]["$ref"].endswith("/SourceKind")
    assert "HTTPBearer" in document["components"]["securitySchemes"]
