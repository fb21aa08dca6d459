"""`GET /api/v1/projects/{project_id}` against a stand-in database: each thread carries what its agent tool shows,
as the thread's own context budget does (the engine's project view knows the budget only)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from fastapi.testclient import TestClient

from api.tokens import Role
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app

AT = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _thread(thread_id: str) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "node_id": "node-1",
        "context_budget_remaining_pct": 61.0,
        "context_budget_level": "safe",
        "must_finish_before_compaction": False,
        "updated_at": AT.isoformat(),
    }


PROJECT_ROW = {
    "project_id": "proj-1",
    "next_compaction_risk_thread_id": None,
    "threads_requiring_handoff": [],
    "master_context_strategy_summary": "",
    "new_subtask_thread_ids": ["thread-a"],
    "active_thread_contexts": orjson.dumps([_thread("thread-a"), _thread("thread-b")]).decode(),
}
REPORTED = {
    "thread_id": "thread-a",
    "agent_tool": "claude-code",
    "model": "claude-opus-4-5",
    "shown_remaining_pct": 74.5,
}


@dataclass
class ProjectDatabase:
    """The project's row and the latest agent-tool report of thread-a (thread-b has none, like a simulated one)."""

    def query(self, sql: str, parameters: dict[str, Any]) -> _Rows:
        if "FROM project_context_risk" in sql:
            return _Rows([PROJECT_ROW] if parameters["project_id"] == "proj-1" else [])
        if "FROM thread_context_snapshots" in sql:
            return _Rows([REPORTED] if "thread-a" in parameters["ids"] else [])
        raise AssertionError(sql)


@dataclass
class _Rows:
    rows: list[dict[str, Any]]

    def named_results(self) -> list[dict[str, Any]]:
        return self.rows


def test_each_thread_of_a_project_carries_its_agent_tool_and_the_percent_it_shows(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path, RecordingPublisher(), clickhouse=ProjectDatabase())) as client:
        response = client.get("/api/v1/projects/proj-1", headers=bearer(Role.USER, "ana", "proj-1"))
    assert response.status_code == 200, response.text
    a, b = response.json()["active_thread_contexts"]
    assert (a["thread_id"], a["agent_tool"], a["model"], a["shown_remaining_pct"]) == (
        "thread-a",
        "claude-code",
        "claude-opus-4-5",
        74.5,
    )
    assert a["context_budget_remaining_pct"] == 61.0  # the budget stays the engine's
    assert (b["thread_id"], b["agent_tool"], b["shown_remaining_pct"]) == ("thread-b", None, None)
    assert response.json()["new_subtask_thread_ids"] == ["thread-a"]
