"""`POST /api/v1/threads/{id}/handoff-requests` (issue 21) on the real ClickHouse: the command the route publishes,
folded by the engine's own fold and stored by the sinks' own path, is an open prepare_handoff under the answered id
in the action list and the 6.3 page, until a ready package clears it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.thread_book import ThreadBook
from api.tokens import Role
from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, MasterActionCommand
from schemas.codec import encode_record
from sinks.migrations import migrate
from streams.engine.fold import Step, ThreadSlot, apply_action_command, apply_handoff, apply_snapshot
from tests.integration.test_api import store, user_of
from tests.unit.api.fakes import PREFIX, RecordingPublisher, bearer, make_app
from tests.unit.engine.builders import package, snapshot
from tests.unit.sinks.records import at

pytestmark = pytest.mark.clickhouse

CONFIG = EngineConfig()


class Stored:
    """One safe thread run through the engine's fold, each step's outputs stored as the sinks store them."""

    def __init__(self, clickhouse: Any, threads: ThreadBook) -> None:
        self.clickhouse, self.threads = clickhouse, threads
        self.tag = uuid.uuid4().hex[:8]
        self.project, self.thread = f"proj-{self.tag}", f"thread-{self.tag}"
        self.slot: ThreadSlot | None = None
        self.apply(
            apply_snapshot(None, snapshot(90, thread=self.thread, project=self.project), DEFAULT_POLICY, at(0), CONFIG)
        )

    def apply(self, step: Step) -> None:
        assert step.slot is not None, "the input changed nothing"
        self.slot = step.slot
        outputs: dict[str, list] = {"thread-state": [step.slot.state]}
        for emit in step.emits:
            outputs.setdefault(emit.topic, []).append(emit.record)
        for topic in ("thread-state", "master-actions"):
            store(self.clickhouse, self.tag, topic, outputs.get(topic, []))
        self.threads.apply(self.thread.encode(), encode_record(step.slot.state))


@pytest.fixture
def stored(clickhouse: Any) -> Stored:
    migrate(clickhouse)
    return Stored(clickhouse, ThreadBook())


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def http(clickhouse: Any, clickhouse_dsn: str, tmp_path: Any, publisher, stored: Stored) -> Iterator[TestClient]:
    app = make_app(tmp_path, publisher, clickhouse=clickhouse, threads=stored.threads, clickhouse_dsn=clickhouse_dsn)
    with TestClient(app) as client:
        yield client


def test_a_request_is_an_open_prepare_handoff_until_the_ready_package_clears_it(http, stored, publisher) -> None:
    url = f"/api/v1/threads/{stored.thread}/handoff-requests"
    headers = user_of(stored.project)
    answer = http.post(url, json={"reason": "critical sibling, unsaved tests"}, headers=headers)
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert (body["accepted"], body["requested"], body["thread_id"]) == (True, True, stored.thread)
    [(topic, key, value)] = publisher.sent
    assert (topic, key) == (f"{PREFIX}master-action-commands", stored.thread.encode())
    command = MasterActionCommand.model_validate_json(value)
    assert (command.action_id, command.command.value, command.action.value) == (
        body["action_id"],
        "request",
        "prepare_handoff",
    )
    assert (command.issued_by, command.note) == ("kris", "critical sibling, unsaved tests")

    stored.apply(apply_action_command(stored.slot, command, at(5), CONFIG))
    listed = http.get("/api/v1/master-actions", params={"thread_id": stored.thread, "open": "true"}, headers=headers)
    prepare = [item for item in listed.json()["items"] if item["actions"] == ["prepare_handoff"]]
    assert [(item["action_id"], item["state"], item["state_reason"]) for item in prepare] == [
        (body["action_id"], "issued", "critical sibling, unsaved tests")
    ]
    page = http.get(f"/api/v1/threads/{stored.thread}/context-budget", headers=headers).json()
    assert "prepare_handoff" in page["pending_master_actions"]

    again = http.post(url, headers=headers)  # no body: the reason is optional
    assert again.status_code == 202
    assert (again.json()["requested"], again.json()["action_id"]) == (False, body["action_id"])
    assert len(publisher.sent) == 1

    ready = package("ready", thread=stored.thread, seconds=8).model_copy(update={"project_id": stored.project})
    stored.apply(apply_handoff(stored.slot, ready, at(8), CONFIG))
    page = http.get(f"/api/v1/threads/{stored.thread}/context-budget", headers=headers).json()
    assert "prepare_handoff" not in page["pending_master_actions"]
    done = http.get("/api/v1/master-actions", params={"state": "done"}, headers=headers).json()["items"]
    assert [(item["action_id"], item["state_reason"]) for item in done] == [(body["action_id"], "handoff_ready")]


def test_another_projects_or_an_unknown_thread_is_404_and_bad_bodies_are_422(http, stored, publisher) -> None:
    url = f"/api/v1/threads/{stored.thread}/handoff-requests"
    for headers in (user_of(f"proj-other-{stored.tag}"), bearer(Role.USER, "kris", "proj-elsewhere")):
        assert http.post(url, headers=headers).status_code == 404
    unknown = http.post(
        f"/api/v1/threads/thread-unknown-{stored.tag}/handoff-requests", headers=user_of(stored.project)
    )
    assert unknown.json() == {"detail": "thread not found"}
    for bad in (b"[1]", b'{"reason": 5}', b'{"reason": "' + b"x" * 4097 + b'"}', b"{not json"):
        answer = http.post(url, content=bad, headers=user_of(stored.project))
        assert answer.status_code == 422, (bad, answer.status_code)
    assert http.post(url, content=b"x" * 9000, headers=user_of(stored.project)).status_code == 413
    assert http.post(url, headers=bearer(Role.WORKER, "worker-mac-01", stored.project)).status_code == 403
    assert publisher.sent == []
