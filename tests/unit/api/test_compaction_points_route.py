"""`GET /api/v1/compaction-points` against a stand-in database: what it asks for each caller, and what it shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from api.tokens import Role
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app

AT = datetime(2026, 12, 4, 14, 2, tzinfo=UTC)
KEY = "claude-code|2.1.x|claude-sonnet-4-5|200000"
POINT = {
    "point_key": KEY,
    "agent_tool": "claude-code",
    "tool_version": "2.1.x",
    "model": "claude-sonnet-4-5",
    "context_window_tokens": 200_000,
    "default_point_tokens": 177_000,
    "compaction_point_tokens": 148_230,
    "band_low_tokens": 143_783,
    "band_high_tokens": 152_677,
    "sample_tokens": [148_230, 148_230, 148_230],
    "compactions": 3,
    "since": AT,
    "previous_point_tokens": 172_338,
    "moved_at": AT,
    "moves": 1,
    "project_ids": ["proj-b", "proj-a", "proj-c"],
    "updated_at": AT,
}


@dataclass
class PointsDatabase:
    """Answers each read by the table it names; notes every query with its parameters."""

    threads: dict[str, str] = field(default_factory=lambda: {"thread-a": "proj-a", "thread-c": "proj-c"})
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def query(self, sql: str, parameters: dict[str, Any]) -> _Rows:
        self.asked.append((sql, parameters))
        if "FROM thread_context_latest" in sql:
            thread = parameters["thread_id"]
            return _Rows([{"thread_id": thread, "project_id": self.threads[thread]}] if thread in self.threads else [])
        if sql.startswith("SELECT compaction_point_key"):  # the thread's key (latest_thread reads its projection too)
            return _Rows([self.measured[parameters["thread"]]] if parameters["thread"] in self.measured else [])
        return _Rows([POINT] if "FROM compaction_points" in sql else [])  # no projection overlay

    def points_asked(self) -> list[dict[str, Any]]:
        return [parameters for sql, parameters in self.asked if "FROM compaction_points" in sql]


@dataclass
class _Rows:
    rows: list[dict[str, Any]]

    def named_results(self) -> list[dict[str, Any]]:
        return self.rows


def _get(tmp_path: Path, database: PointsDatabase, role: Role, **params: str) -> Any:
    headers = bearer(role, "someone", *(["proj-a"] if role is not Role.OPERATOR else []))
    with TestClient(make_app(tmp_path, RecordingPublisher(), clickhouse=database)) as client:
        return client.get("/api/v1/compaction-points", params=params, headers=headers)


def test_a_user_asks_for_its_projects_points_and_sees_only_its_own_projects_among_those_concerned(tmp_path) -> None:
    database = PointsDatabase()
    answer = _get(tmp_path, database, Role.USER)
    assert answer.status_code == 200
    assert database.points_asked() == [{"projects": ["proj-a"]}]
    (point,) = answer.json()["points"]
    assert point["project_ids"] == ["proj-a"]
    assert (point["compaction_point_tokens"], point["compactions"], point["previous_point_tokens"]) == (
        148_230,
        3,
        172_338,
    )
    assert answer.json()["thread"] is None


def test_an_operator_asks_for_every_point_and_sees_every_project(tmp_path) -> None:
    database = PointsDatabase()
    answer = _get(tmp_path, database, Role.OPERATOR)
    assert database.points_asked() == [{}]
    assert answer.json()["points"][0]["project_ids"] == ["proj-b", "proj-a", "proj-c"]


def test_a_threads_point_is_the_one_of_the_key_its_projection_measures_it_on(tmp_path) -> None:
    database = PointsDatabase(measured={"thread-a": {"compaction_point_key": KEY, "compaction_point_tokens": 148_230}})
    body = _get(tmp_path, database, Role.USER, thread_id="thread-a").json()
    assert database.points_asked() == [{"point_key": KEY}]  # its own thread's key: no project filter to pass
    assert (body["thread"]["point_key"], body["thread"]["compaction_point_tokens"]) == (KEY, 148_230)
    assert [p["point_key"] for p in body["points"]] == [KEY]
    assert body["points"][0]["project_ids"] == ["proj-a"]


def test_a_thread_not_measured_yet_has_no_key_and_no_point(tmp_path) -> None:
    database = PointsDatabase()
    body = _get(tmp_path, database, Role.USER, thread_id="thread-a").json()
    assert body["thread"] == {
        "schema_version": 1,
        "thread_id": "thread-a",
        "point_key": None,
        "compaction_point_tokens": None,
    }
    assert (body["points"], database.points_asked()) == ([], [])


def test_another_projects_thread_or_an_unknown_one_is_404_before_any_point_is_read(tmp_path) -> None:
    for thread in ("thread-c", "thread-unknown"):
        database = PointsDatabase()
        assert _get(tmp_path, database, Role.USER, thread_id=thread).status_code == 404
        assert database.points_asked() == []


def test_a_malformed_thread_id_is_422(tmp_path) -> None:
    assert _get(tmp_path, PointsDatabase(), Role.USER, thread_id="a b").status_code == 422
