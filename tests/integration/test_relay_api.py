"""Packages and alerts for the master over HTTP (issue 21), on the real ClickHouse written by the sinks' own path."""

from __future__ import annotations

import uuid

import pytest

from api.tokens import Role
from schemas import SESSION_EVENT_ADAPTER, CompactRequested, HandoffPackage
from tests.integration.test_api import World, http, publisher, store, user_of, world  # noqa: F401  (fixtures)
from tests.unit.api.fakes import PREFIX, bearer

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def packages(world: World, clickhouse) -> tuple[HandoffPackage, HandoffPackage]:  # noqa: F811
    """Each thread's ready package, with its thread's project (the engine walk's package names a fixed one)."""
    stored = []
    for outputs, project in ((world.outputs_a, world.project_a), (world.outputs_b, world.project_b)):
        state = outputs["thread-state"][-1]
        package = state.handoff.model_copy(update={"project_id": project})
        store(clickhouse, world.tag, "thread-state", [state.model_copy(update={"handoff": package})])
        stored.append(package)
    return stored[0], stored[1]


def test_a_package_reads_back_whole_and_by_its_thread_only_within_the_callers_projects(http, world, packages) -> None:  # noqa: F811
    package, other = packages
    answer = http.get(f"/api/v1/handoff-packages/{package.handoff_package_id}", headers=user_of(world.project_a))
    assert answer.status_code == 200
    assert HandoffPackage.model_validate_json(answer.content) == package
    assert answer.json()["package_status"] == "ready"
    listed = http.get(f"/api/v1/threads/{world.thread_a}/handoff-packages", headers=user_of(world.project_a))
    assert [item["handoff_package_id"] for item in listed.json()["items"]] == [package.handoff_package_id]
    hidden = http.get(f"/api/v1/handoff-packages/{other.handoff_package_id}", headers=user_of(world.project_a))
    assert hidden.status_code == 404
    assert http.get(f"/api/v1/threads/{world.thread_b}/handoff-packages", headers=user_of(world.project_a)).json() == {
        "items": [],
        "schema_version": 1,
    }


def test_consuming_publishes_the_consumed_version_keyed_by_the_from_thread(http, world, publisher, packages) -> None:  # noqa: F811
    package, _ = packages
    url = f"/api/v1/handoff-packages/{package.handoff_package_id}/consume"
    relay = f"thread-relay-{world.tag}"
    answer = http.post(url, json={"to_thread_id": relay}, headers=user_of(world.project_a))
    assert answer.status_code == 202
    topic, key, value = publisher.sent[-1]
    consumed = HandoffPackage.model_validate_json(value)
    assert (topic, key) == (f"{PREFIX}handoff-packages", world.thread_a.encode())
    assert (consumed.package_status.value, consumed.to_thread_id) == ("consumed", relay)
    assert consumed.consumed_at is not None
    assert consumed.model_copy(update={"package_status": "ready", "to_thread_id": None, "consumed_at": None}) == package
    assert HandoffPackage.model_validate_json(answer.content) == consumed


def test_bad_consumes_are_4xx_with_a_message_and_publish_nothing(http, world, publisher, clickhouse, packages) -> None:  # noqa: F811
    package, other = packages
    url = f"/api/v1/handoff-packages/{package.handoff_package_id}/consume"
    same = http.post(url, json={"to_thread_id": world.thread_a}, headers=user_of(world.project_a))
    assert same.status_code == 422
    assert "another thread" in same.text
    assert http.post(url, json={}, headers=user_of(world.project_a)).status_code == 422
    foreign = f"/api/v1/handoff-packages/{other.handoff_package_id}/consume"
    assert http.post(foreign, json={"to_thread_id": "t-x"}, headers=user_of(world.project_a)).status_code == 404
    # a draft package (stored the sinks' way, as the handoff of a thread's state) cannot be consumed
    state = world.outputs_a["thread-state"][-1]
    draft = package.model_copy(
        update={"handoff_package_id": f"hp-draft-{uuid.uuid4().hex[:6]}", "package_status": "draft", "ready_at": None}
    )
    store(clickhouse, world.tag, "thread-state", [state.model_copy(update={"handoff": draft})])
    answer = http.post(
        f"/api/v1/handoff-packages/{draft.handoff_package_id}/consume",
        json={"to_thread_id": "t-x"},
        headers=user_of(world.project_a),
    )
    assert answer.status_code == 409
    assert answer.json() == {"detail": "the package is draft, only a ready one can be consumed"}
    assert publisher.sent == []


def test_alerts_list_in_their_latest_status_filtered_and_within_the_callers_projects(http, world) -> None:  # noqa: F811
    latest = {}
    for alert in world.outputs_a["alerts"]:
        latest[alert.alert_id] = alert.alert_status.value
    answer = http.get("/api/v1/alerts", headers=user_of(world.project_a))
    assert answer.status_code == 200
    assert {item["alert_id"]: item["alert_status"] for item in answer.json()["items"]} == latest
    opened = http.get(
        "/api/v1/alerts", params={"thread_id": world.thread_a, "status": "opened"}, headers=user_of(world.project_a)
    )
    assert sorted(item["alert_id"] for item in opened.json()["items"]) == sorted(
        a for a, s in latest.items() if s == "opened"
    )
    assert "opened" in latest.values()
    hidden = http.get("/api/v1/alerts", params={"project_id": world.project_b}, headers=user_of(world.project_a))
    assert hidden.status_code == 404
    bad = http.get("/api/v1/alerts", params={"status": "nonsense"}, headers=user_of(world.project_a))
    assert bad.status_code == 422


def test_a_compaction_request_is_a_compact_requested_event_on_the_threads_partition(http, world, publisher) -> None:  # noqa: F811
    answer = http.post(f"/api/v1/threads/{world.thread_a}/compaction-requests", headers=user_of(world.project_a))
    assert answer.status_code == 202
    topic, key, value = publisher.sent[-1]
    event = SESSION_EVENT_ADAPTER.validate_json(value)
    assert (topic, key) == (f"{PREFIX}session-events", world.thread_a.encode())
    assert isinstance(event, CompactRequested)
    assert (event.thread_id, event.project_id, event.requested_by) == (world.thread_a, world.project_a, "kris")
    hidden = http.post(f"/api/v1/threads/{world.thread_b}/compaction-requests", headers=user_of(world.project_a))
    assert hidden.status_code == 404
    assert len(publisher.sent) == 1


def test_a_worker_reads_and_consumes_only_the_threads_it_reports(http, world, publisher, packages) -> None:  # noqa: F811
    package, _ = packages
    reporter = world.outputs_a["thread-state"][-1].worker_id
    own = bearer(Role.WORKER, reporter, world.project_a)
    other = bearer(Role.WORKER, "worker-elsewhere", world.project_a)
    detail = f"/api/v1/threads/{world.thread_a}/context-budget"
    one = f"/api/v1/handoff-packages/{package.handoff_package_id}"
    assert http.get(detail, headers=own).json()["handoff_package_id"] == package.handoff_package_id
    assert HandoffPackage.model_validate_json(http.get(one, headers=own).content) == package
    for url in (detail, one):
        assert http.get(url, headers=other).status_code == 404  # another worker's thread: as if unknown
    consume = {"to_thread_id": f"thread-relay-{world.tag}"}
    assert http.post(f"{one}/consume", json=consume, headers=other).status_code == 404
    assert publisher.sent == []
    assert http.post(f"{one}/consume", json=consume, headers=own).status_code == 202
    assert HandoffPackage.model_validate_json(publisher.sent[-1][2]).to_thread_id == consume["to_thread_id"]
