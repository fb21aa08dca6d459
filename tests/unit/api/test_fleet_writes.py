"""Operator writes (issue 21): conversations and policies go onto their compacted topics, keyed as declared."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.tokens import Role
from schemas import Conversation, ThresholdPolicy
from schemas.codec import encode_record
from tests.unit.api.fakes import PREFIX, RecordingPublisher, bearer, make_app
from tests.unit.engine.builders import at

OPERATOR = bearer(Role.OPERATOR, "ops")
USER = bearer(Role.USER, "kris", "proj-001")
CONVERSATION = Conversation(
    conversation_id="conv-master",
    conversation_type="master_agent",
    project_id="proj-001",
    project_title="主 Agent",
    thread_ids=["thread-main"],
    updated_at=at(0),
)
POLICY = ThresholdPolicy(project_id="proj-001", safe_min_pct=80, watch_min_pct=60, urgent_min_pct=30)


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, publisher)) as client:  # its database fails the test when queried
        yield client


def test_an_operator_registers_a_conversation_keyed_by_its_id(client, publisher) -> None:
    answer = client.put("/api/v1/conversations/conv-master", content=encode_record(CONVERSATION), headers=OPERATOR)
    assert answer.status_code == 202
    assert publisher.sent == [(f"{PREFIX}conversations", b"conv-master", encode_record(CONVERSATION))]


def test_an_operator_sets_a_projects_policy_keyed_by_project(client, publisher) -> None:
    answer = client.put("/api/v1/projects/proj-001/threshold-policy", content=encode_record(POLICY), headers=OPERATOR)
    assert answer.status_code == 202
    assert publisher.sent == [(f"{PREFIX}policies", b"proj-001", encode_record(POLICY))]


@pytest.mark.parametrize(
    ("url", "body"),
    [("/api/v1/conversations/conv-master", CONVERSATION), ("/api/v1/projects/proj-001/threshold-policy", POLICY)],
)
def test_only_an_operator_writes_the_registry_and_the_policies(client, publisher, url, body) -> None:
    for headers in (USER, bearer(Role.WORKER, "worker-1", "proj-001")):
        answer = client.put(url, content=encode_record(body), headers=headers)
        assert answer.status_code == 403
        assert answer.json()["detail"].endswith("allowed roles: operator")
    assert publisher.sent == []


def test_a_body_for_another_id_than_the_path_or_an_invalid_one_is_422(client, publisher) -> None:
    other = client.put("/api/v1/conversations/conv-other", content=encode_record(CONVERSATION), headers=OPERATOR)
    assert other.status_code == 422
    assert other.json()["detail"][0]["loc"] == ["body", "conversation_id"]
    inverted = POLICY.model_dump(mode="json") | {"watch_min_pct": 90}
    bad = client.put("/api/v1/projects/proj-001/threshold-policy", json=inverted, headers=OPERATOR)
    assert bad.status_code == 422
    assert publisher.sent == []


def test_a_worker_may_not_request_a_compaction(client, publisher) -> None:
    worker = bearer(Role.WORKER, "worker-1", "proj-001")
    answer = client.post("/api/v1/threads/thread-abc/compaction-requests", headers=worker)
    assert answer.status_code == 403
    assert answer.json()["detail"].endswith("allowed roles: operator, user")
    assert publisher.sent == []
