"""Issue 20's probes as tests: a takeover of another project's thread, a version that freezes a thread, a capture
time far from the clock, a handoff package the engine would demote or drop. Each is refused (or answered for what
the engine will do) and nothing reaches Kafka that should not."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.thread_book import ThreadBook
from api.tokens import Role
from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, HandoffPackage, SourceKind
from schemas.codec import encode_record
from streams.engine.fold import apply_handoff, apply_snapshot
from tests.samples import HANDOFF_READY, SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app
from tests.unit.engine.builders import snapshot

THREAD = SPEC_REPORT_REQUEST["thread_id"]
REPORT_URL = "/api/v1/workers/worker-mac-01/thread-context"
PACKAGE_URL = f"/api/v1/threads/{THREAD}/handoff-packages"
ATTACKER = bearer(Role.WORKER, "worker-mac-01", "proj-a")
OWNER = bearer(Role.WORKER, "worker-mac-01", "proj-001")
NOW = datetime.now(UTC)


def book_with(*, project: str = "proj-001", version: int = 1, package: HandoffPackage | None = None) -> ThreadBook:
    """The book as the engine's thread-state topic would fill it: the thread owned by `project`."""
    source = SourceKind(SPEC_REPORT_REQUEST["source_kind"])
    state = snapshot(20, thread=THREAD, project=project, version=version, source=source)
    state = state.model_copy(update={"captured_at": NOW})
    slot = apply_snapshot(None, state, DEFAULT_POLICY, NOW, EngineConfig()).slot
    if package is not None:
        slot = apply_handoff(slot, package, NOW, EngineConfig()).slot
    book = ThreadBook()
    assert book.apply(THREAD.encode(), encode_record(slot.state))
    return book


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


def client_with(tmp_path: Path, publisher: RecordingPublisher, book: ThreadBook) -> TestClient:
    return TestClient(make_app(tmp_path, publisher, threads=book))


@pytest.fixture
def client(tmp_path: Path, publisher: RecordingPublisher) -> Iterator[TestClient]:
    with client_with(tmp_path, publisher, book_with()) as client:
        yield client


def report(**change: object) -> bytes:
    return dumps({**SPEC_REPORT_REQUEST, "captured_at": NOW.isoformat(), **change})


def test_another_projects_worker_cannot_take_a_thread_over(client, publisher) -> None:
    answer = client.post(
        REPORT_URL, content=report(project_id="proj-a", context_budget_remaining_pct=99), headers=ATTACKER
    )
    assert answer.status_code == 403
    assert "another project" in answer.json()["detail"]
    assert publisher.sent == []


def test_the_owners_report_is_taken(client, publisher) -> None:
    assert client.post(REPORT_URL, content=report(), headers=OWNER).status_code == 200
    assert len(publisher.sent) == 1


def test_an_unknown_thread_belongs_to_its_first_report_at_once(tmp_path, publisher) -> None:
    """Before the engine's state comes back, the API's own accepted report already decides the thread's project."""
    with client_with(tmp_path, publisher, ThreadBook()) as client:
        assert client.post(REPORT_URL, content=report(), headers=OWNER).status_code == 200
        taken = client.post(REPORT_URL, content=report(project_id="proj-a"), headers=ATTACKER)
    assert taken.status_code == 403
    assert len(publisher.sent) == 1


def test_another_projects_package_for_the_thread_is_403(client, publisher) -> None:
    hijack = dumps({**HANDOFF_READY, "project_id": "proj-a"})
    answer = client.post(PACKAGE_URL, content=hijack, headers=ATTACKER)
    assert answer.status_code == 403
    assert publisher.sent == []


def test_another_workers_package_for_the_thread_is_403(client, publisher) -> None:
    other = bearer(Role.WORKER, "worker-win-02", "proj-001")
    assert client.post(PACKAGE_URL, content=dumps(HANDOFF_READY), headers=other).status_code == 403
    assert publisher.sent == []


def test_a_version_far_ahead_of_captured_at_is_422_and_cannot_freeze_the_thread(client, publisher) -> None:
    frozen = client.post(REPORT_URL, content=report(), headers={**OWNER, "X-Snapshot-Version": str(2**53)})
    assert frozen.status_code == 422
    assert frozen.json()["detail"][0]["loc"] == ["header", "X-Snapshot-Version"]
    assert publisher.sent == []
    critical = client.post(REPORT_URL, content=report(context_budget_remaining_pct=5), headers=OWNER)
    assert critical.json()["accepted"] is True


def test_a_report_the_engine_will_drop_as_not_newer_is_not_accepted(tmp_path, publisher) -> None:
    newest = 1 << 40
    with client_with(tmp_path, publisher, book_with(version=newest)) as client:
        older = client.post(REPORT_URL, content=report(), headers={**OWNER, "X-Snapshot-Version": str(newest - 1)})
        newer = client.post(REPORT_URL, content=report(), headers={**OWNER, "X-Snapshot-Version": str(newest + 1)})
        repeat = client.post(REPORT_URL, content=report(), headers={**OWNER, "X-Snapshot-Version": str(newest + 1)})
    assert (older.json()["accepted"], older.json()["reason"]) == (False, "not_newer")
    assert (newer.json()["accepted"], newer.json()["reason"]) == (True, None)
    assert repeat.json()["accepted"] is False  # the API's own published mark counts before the engine's state
    assert len(publisher.sent) == 3  # published all the same: the engine decides


@pytest.mark.parametrize(
    "captured_at",
    ["9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+00:00", (NOW + timedelta(hours=2)).isoformat()],
    ids=["year-9999", "year-0001", "two-hours-ahead"],
)
def test_a_capture_time_far_from_the_receivers_clock_is_422(client, publisher, captured_at: str) -> None:
    body = report(captured_at=captured_at, last_compaction_at=None, compaction_count=0)
    answer = client.post(REPORT_URL, content=body, headers=OWNER)
    assert answer.status_code == 422
    [error] = answer.json()["detail"]
    assert error["loc"] == ["body", "captured_at"]
    assert "captured_at" in error["msg"]
    assert publisher.sent == []


def test_a_ready_package_without_its_summary_is_answered_as_the_draft_the_engine_keeps(client, publisher) -> None:
    bare = dumps({**HANDOFF_READY, "summary_text": ""})
    answer = client.post(PACKAGE_URL, content=bare, headers=OWNER)
    assert answer.status_code == 202
    body = answer.json()
    assert body["package_status"] == "draft"
    assert "summary_text" in body["reason"]
    assert len(publisher.sent) == 1


def test_a_ready_package_with_a_summary_and_no_files_or_commands_is_answered_ready(client) -> None:
    """Spec 8.3 is best effort: a design or research thread has no files, commands or tests to list."""
    summary_only = dumps({**HANDOFF_READY, "critical_files": [], "critical_commands": [], "critical_tests": []})
    body = client.post(PACKAGE_URL, content=summary_only, headers=OWNER).json()
    assert (body["package_status"], body["reason"]) == ("ready", None)


def test_a_complete_ready_package_is_answered_ready(client) -> None:
    body = client.post(PACKAGE_URL, content=dumps(HANDOFF_READY), headers=OWNER).json()
    assert (body["package_status"], body["reason"]) == ("ready", None)


def test_a_package_older_than_the_threads_current_one_is_409_with_the_reason(tmp_path, publisher) -> None:
    current = HandoffPackage.model_validate_json(dumps(HANDOFF_READY))
    later = {"created_at": current.created_at + timedelta(1), "ready_at": current.ready_at + timedelta(1)}
    newer = current.model_copy(update={"handoff_package_id": "hp-new", **later})
    with client_with(tmp_path, publisher, book_with(package=newer)) as client:
        answer = client.post(PACKAGE_URL, content=dumps(HANDOFF_READY), headers=OWNER)
    assert answer.status_code == 409
    assert "hp-new" in answer.json()["detail"]
    assert publisher.sent == []
