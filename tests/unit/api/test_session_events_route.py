"""`POST /api/v1/workers/{worker_id}/session-events`: who may post, what is refused, what reaches Kafka."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.tokens import Role
from schemas import SESSION_EVENT_ADAPTER, CompactionCompleted
from tests.samples import SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import PREFIX, RecordingPublisher, bearer, make_app

URL = "/api/v1/workers/worker-mac-01/session-events"
WORKER = bearer(Role.WORKER, "worker-mac-01", "proj-001")


def _event(**changes: object) -> dict[str, object]:
    event = {
        "type": "compaction_completed",
        "thread_id": "thread-abc",
        "event_id": "compaction-1",
        "occurred_at": datetime.now(UTC).isoformat(),
        "project_id": "proj-001",
        "trigger_mode": "request_start",
        "tokens_before": 240_000,
    }
    return {**event, **changes}


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, publisher)) as client:
        yield client


def post(client: TestClient, body: object, headers: dict[str, str] = WORKER, url: str = URL):
    return client.post(url, content=json.dumps(body), headers={"Content-Type": "application/json", **headers})


def test_a_compaction_event_is_published_on_session_events_keyed_by_thread(client, publisher) -> None:
    assert post(client, _event()).status_code == 202
    [(topic, key, value)] = publisher.sent
    assert (topic, key) == (f"{PREFIX}session-events", b"thread-abc")
    event = SESSION_EVENT_ADAPTER.validate_json(value)
    assert isinstance(event, CompactionCompleted)
    assert (event.event_id, event.tokens_before, event.worker_id) == ("compaction-1", 240_000, "worker-mac-01")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"type": "no_such_event"}, "type"),
        ({"trigger_mode": "whenever"}, "trigger_mode"),
        ({"tokens_before": "240000"}, "tokens_before"),  # strict: no coercion
        ({"extra": 1}, "extra"),
        ({"project_id": None}, "project_id"),
        ({"worker_id": "worker-other"}, "worker_id"),
        ({"occurred_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}, "occurred_at"),
        ({"occurred_at": "9999-01-01T00:00:00+00:00"}, "occurred_at"),
    ],
)
def test_an_invalid_event_is_422_with_a_message_and_nothing_is_published(client, publisher, changes, field) -> None:
    answer = post(client, _event(**changes))
    assert answer.status_code == 422
    assert any(field in json.dumps(error["loc"]) or field in error["msg"] for error in answer.json()["detail"])
    assert publisher.sent == []


def test_another_workers_or_another_projects_event_is_403(client, publisher) -> None:
    assert post(client, _event(), headers=bearer(Role.WORKER, "worker-other", "proj-001")).status_code == 403
    assert post(client, _event(project_id="proj-999")).status_code == 403
    assert publisher.sent == []


def test_an_event_naming_another_project_than_its_threads_is_403(client, publisher) -> None:
    report = client.post(
        "/api/v1/workers/worker-mac-01/thread-context",
        content=dumps(SPEC_REPORT_REQUEST),
        headers={"Content-Type": "application/json", **WORKER},
    )
    assert report.status_code == 200  # thread-abc is now proj-001's
    operator = bearer(Role.OPERATOR, "ops")
    answer = post(client, _event(project_id="proj-002"), headers=operator)
    assert answer.status_code == 403
    assert "another project" in answer.json()["detail"]
    assert len(publisher.sent) == 1


def test_an_array_of_events_is_published_in_order(client, publisher) -> None:
    events = [_event(event_id="compaction-1"), _event(event_id="compaction-2", thread_id="thread-xyz")]
    assert post(client, events).status_code == 202
    published = [(key, SESSION_EVENT_ADAPTER.validate_json(value)) for _, key, value in publisher.sent]
    assert [(key, e.event_id, e.worker_id) for key, e in published] == [
        (b"thread-abc", "compaction-1", "worker-mac-01"),
        (b"thread-xyz", "compaction-2", "worker-mac-01"),
    ]


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"trigger_mode": "whenever"}, "trigger_mode"), ({"project_id": None}, "project_id"), ({"extra": 1}, "extra")],
)
def test_one_invalid_event_of_an_array_refuses_it_all_naming_its_index(client, publisher, changes, field) -> None:
    answer = post(client, [_event(), _event(event_id="compaction-2", **changes)])
    assert answer.status_code == 422
    assert any(error["loc"][:2] == ["body", 1] and field in json.dumps(error) for error in answer.json()["detail"])
    assert publisher.sent == []


def test_an_array_with_another_projects_event_is_403_and_nothing_is_published(client, publisher) -> None:
    assert post(client, [_event(), _event(event_id="compaction-2", project_id="proj-999")]).status_code == 403
    assert post(client, []).status_code == 422
    assert publisher.sent == []
