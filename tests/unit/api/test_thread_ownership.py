"""Issue 38, 3: a thread belongs to the worker that reports it. Another worker of the same project may not report it,
send its events or relay a package into it (403, nothing published); an operator moves it, as a recorded event."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.thread_book import ThreadBook
from api.tokens import Role
from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, Codec, ThreadWorkerMoved
from schemas.codec import encode_record
from streams.engine.fold import apply_snapshot
from tests.samples import SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app
from tests.unit.api.test_consume_route import PackageDatabase
from tests.unit.engine.builders import at, package, snapshot

OWNER, INTRUDER = "worker-mac-01", "worker-mac-02"
THREAD = SPEC_REPORT_REQUEST["thread_id"]
PROJECT = SPEC_REPORT_REQUEST["project_id"]
OPERATOR = bearer(Role.OPERATOR, "ops-ana")
MOVE_URL = f"/api/v1/threads/{THREAD}/worker"


def worker(name: str) -> dict[str, str]:
    return bearer(Role.WORKER, name, PROJECT, "proj-1")


def owned_book(*threads: tuple[str, str, str]) -> ThreadBook:
    """The book after the engine published each (thread, project, worker)'s state on `thread-state`."""
    book = ThreadBook()
    for thread, project, owner in threads:
        first = snapshot(50, thread=thread, project=project).model_copy(update={"worker_id": owner})
        state = apply_snapshot(None, first, DEFAULT_POLICY, at(0), EngineConfig()).slot.state
        assert book.apply(thread.encode(), encode_record(state))
    return book


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    book = owned_book((THREAD, PROJECT, OWNER), ("thread-a", "proj-1", OWNER), ("relay-b", "proj-1", INTRUDER))
    database = PackageDatabase(package("ready"))  # hp-1 of thread-a (proj-1), OWNER's
    with TestClient(make_app(tmp_path, publisher, threads=book, clickhouse=database)) as client:
        yield client


def report(client: TestClient, name: str):
    body = dumps({**SPEC_REPORT_REQUEST, "worker_id": name, "captured_at": datetime.now(UTC).isoformat()})
    return client.post(f"/api/v1/workers/{name}/thread-context", content=body, headers=worker(name))


def test_another_worker_of_the_project_may_not_report_the_thread(client, publisher) -> None:
    refused = report(client, INTRUDER)
    assert refused.status_code == 403
    assert f"belongs to worker {OWNER}" in refused.json()["detail"]
    assert publisher.sent == []
    assert report(client, OWNER).status_code == 200


def test_nor_send_its_session_events(client, publisher) -> None:
    event = {
        "type": "compaction_started",
        "thread_id": THREAD,
        "event_id": "e-1",
        "occurred_at": datetime.now(UTC).isoformat(),
        "project_id": PROJECT,
        "trigger_mode": "request_start",
    }
    url = f"/api/v1/workers/{INTRUDER}/session-events"
    refused = client.post(url, content=dumps(event), headers=worker(INTRUDER))
    assert refused.status_code == 403
    assert publisher.sent == []


def test_nor_relay_its_own_package_into_another_workers_thread(client, publisher) -> None:
    url = "/api/v1/handoff-packages/hp-1/consume"
    refused = client.post(url, json={"to_thread_id": "relay-b"}, headers=worker(OWNER))
    assert refused.status_code == 403
    assert publisher.sent == []


def test_a_worker_may_not_move_a_thread_nor_post_a_move_as_an_event(client, publisher) -> None:
    assert (
        client.put(MOVE_URL, json={"worker_id": INTRUDER, "reason": "mine"}, headers=worker(INTRUDER)).status_code
        == 403
    )
    move = {
        "type": "thread_worker_moved",
        "thread_id": THREAD,
        "event_id": "m-1",
        "occurred_at": datetime.now(UTC).isoformat(),
        "project_id": PROJECT,
        "from_worker_id": OWNER,
        "to_worker_id": INTRUDER,
        "moved_by": INTRUDER,
        "reason": "mine",
    }
    url = f"/api/v1/workers/{INTRUDER}/session-events"
    refused = client.post(url, content=dumps(move), headers=worker(INTRUDER))
    assert refused.status_code == 403
    assert "operator" in refused.json()["detail"]
    assert publisher.sent == []


def test_an_operator_moves_the_thread_as_a_recorded_event(client, publisher) -> None:
    answer = client.put(MOVE_URL, json={"worker_id": INTRUDER, "reason": "mac-01 retired"}, headers=OPERATOR)
    assert answer.status_code == 202
    [(topic, key, value)] = publisher.sent
    assert (topic, key) == ("ctx.session-events", THREAD.encode())
    move = Codec(ThreadWorkerMoved).decode(value)
    assert (move.from_worker_id, move.to_worker_id, move.moved_by, move.reason, move.project_id) == (
        OWNER,
        INTRUDER,
        "ops-ana",
        "mac-01 retired",
        PROJECT,
    )


@pytest.mark.parametrize(
    ("body", "status"),
    [({"worker_id": OWNER, "reason": "again"}, 409), ({"worker_id": INTRUDER, "reason": ""}, 422)],
    ids=["to_its_own_worker", "without_a_reason"],
)
def test_a_move_to_the_same_worker_or_without_a_reason_is_refused(client, publisher, body, status) -> None:
    assert client.put(MOVE_URL, json=body, headers=OPERATOR).status_code == status
    assert publisher.sent == []
