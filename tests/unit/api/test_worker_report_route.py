"""`POST /api/v1/workers/{worker_id}/thread-context`: who may report, what is refused, what reaches Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.policies import PolicyBook
from api.publisher import RETRY_AFTER_SECONDS
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.tokens import Role
from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, Codec, ThreadContextSnapshot, ThresholdPolicy
from schemas.codec import encode_record
from streams.engine.fold import apply_handoff, apply_snapshot
from tests.samples import SPEC_REPORT_REQUEST, SPEC_REPORT_RESPONSE, dumps
from tests.unit.api.fakes import PREFIX, RecordingPublisher, bearer, make_app
from tests.unit.engine.builders import at, package, snapshot

URL = "/api/v1/workers/worker-mac-01/thread-context"
WORKER = bearer(Role.WORKER, "worker-mac-01", "proj-001")
BODY = dumps(SPEC_REPORT_REQUEST)


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with TestClient(make_app(tmp_path, publisher, api=ApiSettings(max_report_bytes=2_048))) as client:
        yield client


def post(client: TestClient, body: bytes = BODY, headers: dict[str, str] = WORKER, url: str = URL):
    return client.post(url, content=body, headers={"Content-Type": "application/json", **headers})


def test_the_spec_report_is_published_keyed_by_thread_and_answered_like_the_spec(client, publisher) -> None:
    answer = post(client, headers={**WORKER, "Idempotency-Key": "snap-9", "X-Snapshot-Version": "42"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["accepted"] is True
    assert {k: body[k] for k in ("thread_id", "context_budget_level", "next_required_report_in_seconds")} == {
        k: SPEC_REPORT_RESPONSE[k] for k in ("thread_id", "context_budget_level", "next_required_report_in_seconds")
    }
    [(topic, key, value)] = publisher.sent
    snapshot = Codec(ThreadContextSnapshot).decode(value)
    assert (topic, key) == (f"{PREFIX}snapshots", b"thread-abc")
    assert (snapshot.snapshot_id, snapshot.snapshot_version) == ("snap-9", 42)
    assert snapshot.context_budget_remaining_pct == 37


def test_the_projects_policy_from_the_policy_topic_decides_the_level(tmp_path, publisher) -> None:
    book = PolicyBook()
    policy = ThresholdPolicy(project_id="proj-001", safe_min_pct=90, watch_min_pct=80, urgent_min_pct=50)
    assert book.apply(b"proj-001", encode_record(policy))
    with TestClient(make_app(tmp_path, publisher, policies=book)) as client:
        assert post(client).json()["context_budget_level"] == "critical"  # 37 % is below this project's 50


def test_without_a_token_the_answer_is_401_with_a_bearer_challenge(client, publisher) -> None:
    answer = post(client, headers={})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert publisher.sent == []


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer not-a-jwt",
        "Basic d29ya2VyOnB3",
        "Bearer " + bearer(Role.WORKER, "worker-mac-01", "proj-001", secret=b"f" * 32)["Authorization"][7:],
        "Bearer " + bearer(Role.WORKER, "worker-mac-01", "proj-001", ttl_seconds=-3600)["Authorization"][7:],
    ],
    ids=["malformed", "other-scheme", "forged", "expired"],
)
def test_a_malformed_forged_or_expired_token_is_401(client, publisher, authorization: str) -> None:
    assert post(client, headers={"Authorization": authorization}).status_code == 401
    assert publisher.sent == []


def test_a_worker_reporting_as_another_worker_is_403(client, publisher) -> None:
    other = bearer(Role.WORKER, "worker-win-02", "proj-001")
    assert post(client, headers=other).status_code == 403
    assert publisher.sent == []


def test_a_user_token_may_not_report(client) -> None:
    assert post(client, headers=bearer(Role.USER, "worker-mac-01", "proj-001")).status_code == 403


def test_an_operator_may_report_for_any_worker(client, publisher) -> None:
    assert post(client, headers=bearer(Role.OPERATOR, "ops")).status_code == 200
    assert len(publisher.sent) == 1


def test_a_body_naming_another_worker_than_the_path_is_422_on_worker_id(client, publisher) -> None:
    answer = post(client, body=dumps({**SPEC_REPORT_REQUEST, "worker_id": "worker-win-02"}))
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "worker_id"]
    assert publisher.sent == []


def test_a_worker_reporting_for_a_project_not_in_its_token_is_403(client, publisher) -> None:
    assert post(client, body=dumps({**SPEC_REPORT_REQUEST, "project_id": "proj-999"})).status_code == 403
    assert publisher.sent == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"context_budget_remaining_pct": "37"}, "context_budget_remaining_pct"),
        ({"context_budget_remaining_pct": 101}, "context_budget_remaining_pct"),
        ({"context_budget_level": "URGENT"}, "context_budget_level"),
        ({"captured_at": "2026-03-25T15:56:00"}, "captured_at"),
        ({"must_finish_before_compaction": "true"}, "must_finish_before_compaction"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_an_invalid_body_is_422_naming_the_failing_field(client, publisher, change: dict, field: str) -> None:
    answer = post(client, body=dumps({**SPEC_REPORT_REQUEST, **change}))
    assert answer.status_code == 422
    assert ["body", field] in [error["loc"] for error in answer.json()["detail"]]
    assert publisher.sent == []


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b"null", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_422(client, body: bytes) -> None:
    assert post(client, body=body).status_code == 422


def test_a_body_over_the_limit_is_413_before_it_is_parsed(client, publisher) -> None:
    padded = dumps({**SPEC_REPORT_REQUEST, "task_id": "t" * 3_000})
    assert post(client, body=padded).status_code == 413
    assert publisher.sent == []


def test_a_chunked_body_over_the_limit_is_413(client, publisher) -> None:
    chunks = iter([b"{" + b" " * 1_500, b" " * 1_500 + b"}"])
    answer = client.post(URL, content=chunks, headers={**WORKER, "Content-Type": "application/json"})
    assert answer.status_code == 413
    assert publisher.sent == []


@pytest.mark.parametrize("header", [{"Idempotency-Key": "has space"}, {"X-Snapshot-Version": "-3"}])
def test_an_invalid_identity_header_is_422_naming_the_header(client, header: dict[str, str]) -> None:
    answer = post(client, headers={**WORKER, **header})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["header", next(iter(header))]


@pytest.mark.parametrize("worker_id", ["worker%20mac", "x" * 129, "tab%09worker", "%0A"])
def test_an_invalid_worker_id_in_the_path_is_422(client, worker_id: str) -> None:
    answer = post(client, url=f"/api/v1/workers/{worker_id}/thread-context")
    assert answer.status_code == 422


def test_when_kafka_does_not_acknowledge_the_answer_is_503_with_retry_after(tmp_path) -> None:
    with TestClient(make_app(tmp_path, RecordingPublisher(failing=True))) as client:
        answer = post(client)
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "accepted" not in answer.json()


def test_the_answer_lists_only_the_open_actions_the_engine_published_with_their_ids(tmp_path, publisher) -> None:
    # The engine's state of the spec's thread: urgent in cycle 1, with a ready package that did prepare_handoff.
    report = SPEC_REPORT_REQUEST
    state = apply_snapshot(
        None,
        snapshot(37, thread=report["thread_id"], project=report["project_id"], compactions=1),
        DEFAULT_POLICY,
        at(0),
        EngineConfig(),
    ).slot
    state = apply_handoff(state, package(thread=report["thread_id"], seconds=1), at(1), EngineConfig()).slot.state
    threads = ThreadBook()
    assert threads.apply(state.thread_id.encode(), encode_record(state))
    with TestClient(make_app(tmp_path, publisher, threads=threads)) as client:
        body = post(client).json()
    assert body["master_actions"] == ["avoid_large_context_append", "finish_atomic_subtask", "precreate_relay_thread"]
    assert [item["action_id"] for item in body["open_master_actions"]] == [
        item.action_id for item in state.master_actions if item.open
    ]
    assert len(body["open_master_actions"]) == 3


@pytest.mark.parametrize("thread_id", ["a/b", "a\x00b", "a\u202eb", "a\x1fb"])
def test_a_thread_id_no_route_could_reach_or_show_is_422_and_not_published(client, publisher, thread_id) -> None:
    answer = post(client, dumps({**SPEC_REPORT_REQUEST, "thread_id": thread_id}))
    assert answer.status_code == 422
    assert "thread_id" in answer.text
    assert publisher.sent == []
