"""`GET /api/v1/compaction-points` on embedded ClickHouse: the fleet's points as the sinks store them, scoped to the
keys a user's projects run on, and the point of one thread's key.

Keys: the Codex key `gpt-5-codex` was learnt from compactions of proj-a and proj-z; `gpt-5-codex-z` from proj-z's
alone, but thread-a (proj-a) is measured on it; `gpt-5-codex-other` from proj-z's alone, and nothing of proj-a runs
on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.tokens import Role
from core.fleet_points import thread_key
from sinks.migrations import migrate
from sinks.tables import COMPACTION_POINTS, THREAD_CONTEXT_LATEST, THREAD_CONTEXT_PROJECTION
from tests.conftest import fresh_database
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app
from tests.unit.sinks.records import compaction_point, engine_outputs, projection

pytestmark = pytest.mark.clickhouse

SHARED = compaction_point("gpt-5-codex", "proj-z").model_copy(update={"project_ids": ["proj-z", "proj-a"]})
MEASURED_ON = compaction_point("gpt-5-codex-z", "proj-z")
OTHER = compaction_point("gpt-5-codex-other", "proj-z")
USER_A = bearer(Role.USER, "kris", "proj-a")


@pytest.fixture(scope="module")
def http(clickhouse: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with fresh_database(clickhouse) as client:
        migrate(client)
        for table, records in (
            (COMPACTION_POINTS, [SHARED, MEASURED_ON, OTHER]),
            (
                THREAD_CONTEXT_PROJECTION,
                [
                    projection("thread-a", "proj-a").model_copy(
                        update={"compaction_point_key": MEASURED_ON.point_key, "compaction_point_tokens": 231_000}
                    ),
                    projection("thread-z", "proj-z"),
                ],
            ),
            (
                THREAD_CONTEXT_LATEST,
                [engine_outputs(t, p)["thread-state"][-1] for t, p in (("thread-a", "proj-a"), ("thread-z", "proj-z"))],
            ),
        ):
            rows = [table.row(record, offset) for offset, record in enumerate(records)]
            client.insert(table.name, rows, column_names=list(table.column_names))
        with TestClient(make_app(tmp_path_factory.mktemp("api"), RecordingPublisher(), clickhouse=client)) as http:
            yield http


def test_the_projection_names_the_key_the_fold_learns_under() -> None:
    assert projection("thread-a").compaction_point_key == thread_key("codex", None, "gpt-5-codex", 272_000)


def test_a_user_sees_the_points_its_projects_run_on_and_only_its_own_projects_among_them(http: TestClient) -> None:
    answer = http.get("/api/v1/compaction-points", headers=USER_A)
    assert answer.status_code == 200
    points = {p["point_key"]: p for p in answer.json()["points"]}
    assert set(points) == {SHARED.point_key, MEASURED_ON.point_key}
    assert points[SHARED.point_key]["project_ids"] == ["proj-a"]
    assert points[MEASURED_ON.point_key]["project_ids"] == []
    shared = points[SHARED.point_key]
    assert shared["compaction_point_tokens"] == SHARED.compaction_point_tokens
    assert (shared["compactions"], shared["sample_tokens"]) == (3, [231_000, 232_000, 230_500])
    assert shared["since"] is not None


def test_an_operator_sees_every_point_and_project(http: TestClient) -> None:
    answer = http.get("/api/v1/compaction-points", headers=bearer(Role.OPERATOR, "ops"))
    points = {p["point_key"]: p["project_ids"] for p in answer.json()["points"]}
    assert points == {
        SHARED.point_key: ["proj-z", "proj-a"],
        MEASURED_ON.point_key: ["proj-z"],
        OTHER.point_key: ["proj-z"],
    }


def test_a_threads_key_and_point_are_its_projects_callers(http: TestClient) -> None:
    body = http.get("/api/v1/compaction-points", params={"thread_id": "thread-a"}, headers=USER_A).json()
    assert body["thread"] == {
        "schema_version": 1,
        "thread_id": "thread-a",
        "point_key": MEASURED_ON.point_key,
        "compaction_point_tokens": 231_000,
    }
    assert [p["point_key"] for p in body["points"]] == [MEASURED_ON.point_key]
    assert http.get("/api/v1/compaction-points", params={"thread_id": "thread-z"}, headers=USER_A).status_code == 404
    worker = bearer(Role.WORKER, "w-1", "proj-a")
    assert http.get("/api/v1/compaction-points", headers=worker).status_code == 403
