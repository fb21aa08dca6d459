"""Master actions over HTTP (issue 21) on the real ClickHouse: the engine's records stored by the sinks' own path."""

from __future__ import annotations

import orjson
import pytest

from api.tokens import Role
from schemas import MasterActionCommand

# the fixtures of the API's own integration tests: the same stored world
from tests.integration.test_api import World, http, publisher, user_of, world  # noqa: F401
from tests.unit.api.fakes import PREFIX, bearer

pytestmark = pytest.mark.clickhouse

URL = "/api/v1/master-actions"


def latest_states(stored: World) -> dict[str, str]:
    """Each action's last state as the engine published it, computed from the records, not the table."""
    latest: dict[str, str] = {}
    for record in stored.outputs_a["master-actions"]:
        latest[record.action_id] = record.state.value
    return latest


def test_the_list_is_each_action_once_in_its_latest_state_and_filters_by_state(http, world) -> None:  # noqa: F811
    answer = http.get(URL, params={"project_id": world.project_a}, headers=user_of(world.project_a))
    assert answer.status_code == 200
    items = answer.json()["items"]
    assert {item["action_id"]: item["state"] for item in items} == latest_states(world)
    assert {"done", "superseded", "issued"} <= {item["state"] for item in items}
    open_ones = http.get(URL, params={"thread_id": world.thread_a, "open": "true"}, headers=user_of(world.project_a))
    expected = sorted(a for a, s in latest_states(world).items() if s in ("issued", "acknowledged"))
    assert sorted(item["action_id"] for item in open_ones.json()["items"]) == expected
    done = http.get(URL, params={"state": "done"}, headers=user_of(world.project_a)).json()["items"]
    assert [item["actions"] for item in done] == [["prepare_handoff"]]


def test_another_projects_actions_are_not_listed_nor_acked(http, world, publisher) -> None:  # noqa: F811
    mine = http.get(URL, headers=user_of(world.project_a)).json()["items"]
    assert {item["project_id"] for item in mine} == {world.project_a}
    assert http.get(URL, params={"project_id": world.project_b}, headers=user_of(world.project_a)).status_code == 404
    other = next(r.action_id for r in world.outputs_b["master-actions"] if r.state.value == "issued")
    assert http.post(f"{URL}/{other}/ack", headers=user_of(world.project_a)).status_code == 404
    assert publisher.sent == []


def test_ack_and_done_go_to_the_engine_keyed_by_thread_and_a_finished_action_is_409(http, world, publisher) -> None:  # noqa: F811
    states = latest_states(world)
    target = next(a for a, s in states.items() if s == "issued")
    answer = http.post(f"{URL}/{target}/ack", headers=user_of(world.project_a))
    assert answer.status_code == 202
    assert answer.json() == {"accepted": True, "action_id": target, "command": "ack", "schema_version": 1}
    topic, key, value = publisher.sent[-1]
    command = MasterActionCommand.model_validate_json(value)
    assert (topic, key) == (f"{PREFIX}master-action-commands", world.thread_a.encode())
    assert (command.action_id, command.thread_id, command.command.value, command.issued_by) == (
        target,
        world.thread_a,
        "ack",
        "kris",
    )
    assert http.post(f"{URL}/{target}/done", headers=user_of(world.project_a)).status_code == 202
    finished = next(a for a, s in states.items() if s == "done")
    conflict = http.post(f"{URL}/{finished}/done", headers=user_of(world.project_a))
    assert conflict.status_code == 409
    assert orjson.loads(conflict.content) == {"detail": "the action is already done"}


def test_a_worker_acts_only_on_the_threads_it_reports(http, world, publisher) -> None:  # noqa: F811
    target = next(a for a, s in latest_states(world).items() if s == "issued")
    reporter = world.outputs_a["thread-state"][-1].worker_id
    other = bearer(Role.WORKER, "worker-elsewhere", world.project_a)
    assert http.post(f"{URL}/{target}/ack", headers=other).status_code == 404
    own = bearer(Role.WORKER, reporter, world.project_a)
    assert http.post(f"{URL}/{target}/ack", headers=own).status_code == 202


def test_the_thread_budget_lists_only_the_open_actions_with_their_ids(http, world) -> None:  # noqa: F811
    body = http.get(f"/api/v1/threads/{world.thread_a}/context-budget", headers=user_of(world.project_a)).json()
    state = world.outputs_a["thread-state"][-1]
    open_items = [item for item in state.master_actions if item.open]
    assert body["pending_master_actions"] == [item.action.value for item in open_items]
    assert [item["action_id"] for item in body["open_master_actions"]] == [item.action_id for item in open_items]
    assert "prepare_handoff" not in body["pending_master_actions"]  # done by the ready package


def test_a_worker_lists_only_the_actions_of_the_threads_it_reports(http, world) -> None:  # noqa: F811
    reporter = world.outputs_a["thread-state"][-1].worker_id
    own = http.get(URL, params={"open": "true"}, headers=bearer(Role.WORKER, reporter, world.project_a))
    assert own.status_code == 200
    expected = sorted(a for a, s in latest_states(world).items() if s in ("issued", "acknowledged"))
    assert expected
    assert sorted(item["action_id"] for item in own.json()["items"]) == expected
    other = http.get(URL, params={"open": "true"}, headers=bearer(Role.WORKER, "worker-elsewhere", world.project_a))
    assert other.json()["items"] == []
    foreign = http.get(
        URL, params={"project_id": world.project_b}, headers=bearer(Role.WORKER, reporter, world.project_a)
    )
    assert foreign.status_code == 404
