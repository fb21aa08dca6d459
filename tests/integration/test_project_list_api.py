"""`GET /api/v1/projects` (issue 21) on the real ClickHouse: the stored project views, summarised per project."""

from __future__ import annotations

import uuid

import pytest

from api.tokens import Role
from schemas import ThreadContextSummary
from tests.integration.test_api import World, http, publisher, store, world  # noqa: F401  (fixtures)
from tests.unit.api.fakes import bearer
from tests.unit.sinks.records import at, project_detail

pytestmark = pytest.mark.clickhouse


def summary(thread: str, pct: float, level: str, **extra) -> ThreadContextSummary:
    return ThreadContextSummary(
        thread_id=thread,
        node_id="mac-01",
        context_budget_remaining_pct=pct,
        context_budget_level=level,
        must_finish_before_compaction=extra.get("must_finish", False),
        stale=extra.get("stale", False),
        updated_at=at(30),
    )


def test_each_visible_project_with_threads_per_level_risk_handoffs_and_subtask_targets(
    http,  # noqa: F811
    world,  # noqa: F811
    clickhouse,
) -> None:
    project = f"proj-list-{uuid.uuid4().hex[:8]}"
    view = project_detail(project).model_copy(
        update={
            "active_thread_contexts": [
                summary("t-crit", 10, "critical", must_finish=True),
                summary("t-urgent", 35, "urgent"),
                summary("t-safe", 90, "safe"),
                summary("t-watch", 55, "watch"),
            ],
            "threads_requiring_handoff": ["t-crit", "t-urgent"],
            "next_compaction_risk_thread_id": "t-crit",
            "new_subtask_thread_ids": ["t-safe", "t-watch"],
        }
    )
    store(clickhouse, world.tag, "project-risk", [view])
    answer = http.get("/api/v1/projects", headers=bearer(Role.USER, "kris", project, world.project_a))
    assert answer.status_code == 200
    items = {item["project_id"]: item for item in answer.json()["items"]}
    assert set(items) == {project, world.project_a}  # project_b is not the caller's
    assert items[project] == {
        "project_id": project,
        "threads_per_level": {"safe": 1, "watch": 1, "urgent": 1, "critical": 1},
        "next_compaction_risk_thread_id": "t-crit",
        "threads_requiring_handoff_count": 2,
        "new_subtask_thread_ids": ["t-safe", "t-watch"],
        "schema_version": 1,
    }
    operator = http.get("/api/v1/projects", headers=bearer(Role.OPERATOR, "ops")).json()["items"]
    assert {project, world.project_a, world.project_b} <= {item["project_id"] for item in operator}
    detail = http.get(f"/api/v1/projects/{project}", headers=bearer(Role.USER, "kris", project)).json()
    assert detail["new_subtask_thread_ids"] == ["t-safe", "t-watch"]
