"""`PUT /api/v1/threads/{id}/task-importance`: a record on `task-importance` keyed by thread, for a thread the caller's
projects hold; another project's thread answers 404 like an unknown one, and a bad body is 422."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.thread_book import ThreadBook
from api.tokens import Role
from schemas import Codec
from schemas.codec import encode_record
from schemas.projects import TaskImportance
from tests.unit.aggregates.builders import thread_state
from tests.unit.api.fakes import PREFIX, EmptyDatabase, RecordingPublisher, bearer, make_app

USER = bearer(Role.USER, "kris", "proj-001")
URL = "/api/v1/threads/thread-a/task-importance"


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    book = ThreadBook()
    assert book.apply(b"thread-a", encode_record(thread_state("thread-a", project="proj-001")))
    with TestClient(make_app(tmp_path, publisher, threads=book)) as client:  # its database fails the test if queried
        yield client


def test_a_user_sets_the_importance_of_a_thread_of_its_project(client, publisher) -> None:
    answer = client.put(URL, json={"task_importance": 7}, headers=USER)
    assert answer.status_code == 202
    ((topic, key, value),) = publisher.sent
    record = Codec(TaskImportance).decode(value)
    assert (topic, key) == (f"{PREFIX}task-importance", b"thread-a")
    assert (record.thread_id, record.project_id, record.task_importance, record.set_by) == (
        "thread-a",
        "proj-001",
        7,
        "kris",
    )
    assert answer.json()["set_at"] == record.model_dump(mode="json")["set_at"]


def test_a_thread_of_another_project_is_404(client, publisher) -> None:
    answer = client.put(URL, json={"task_importance": 1}, headers=bearer(Role.USER, "other", "proj-002"))
    assert answer.status_code == 404
    assert publisher.sent == []


def test_a_thread_neither_the_book_nor_the_database_knows_is_404(tmp_path, publisher) -> None:
    with TestClient(make_app(tmp_path, publisher, clickhouse=EmptyDatabase())) as client:
        answer = client.put("/api/v1/threads/thread-unknown/task-importance", json={"task_importance": 1}, headers=USER)
    assert answer.status_code == 404
    assert publisher.sent == []


@pytest.mark.parametrize("body", [{"task_importance": -1}, {"task_importance": 1001}, {"task_importance": "5"}, {}])
def test_an_importance_out_of_range_or_not_an_integer_is_422(client, publisher, body) -> None:
    answer = client.put(URL, json=body, headers=USER)
    assert answer.status_code == 422
    assert publisher.sent == []


def test_a_worker_may_not_set_an_importance(client, publisher) -> None:
    answer = client.put(URL, json={"task_importance": 1}, headers=bearer(Role.WORKER, "worker-1", "proj-001"))
    assert answer.status_code == 403
    assert publisher.sent == []
