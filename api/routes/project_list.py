"""`GET /api/v1/projects` (issue 21): the caller's projects at a glance, for a master choosing where to look first.

Roles: user, operator (an operator sees every project, a user the token's projects).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Annotated

from clickhouse_connect.driver.client import Client
from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from api.deps import Context, Reader
from api.read_models import project_detail
from api.responses import errors, record_response
from api.tokens import Role
from schemas import ContextBudgetLevel, ProjectDetail
from schemas.base import Count, Id, IdList, Record
from sinks.rows import VERSION_COLUMN
from sinks.tables import PROJECT_CONTEXT_RISK

router = APIRouter(tags=["bff"])

MAX_PROJECTS = 1000


class ProjectSummary(Record):
    project_id: Id
    threads_per_level: dict[ContextBudgetLevel, Count] = Field(description="Active threads by engine level.")
    next_compaction_risk_thread_id: Id | None = None
    threads_requiring_handoff_count: Count = 0
    new_subtask_thread_ids: IdList = Field(default_factory=list)


class ProjectList(Record):
    items: Annotated[list[ProjectSummary], Field(max_length=MAX_PROJECTS)]


def summary(view: ProjectDetail) -> ProjectSummary:
    levels = Counter(thread.context_budget_level for thread in view.active_thread_contexts)
    return ProjectSummary(
        project_id=view.project_id,
        threads_per_level={level: levels[level] for level in ContextBudgetLevel},
        next_compaction_risk_thread_id=view.next_compaction_risk_thread_id,
        threads_requiring_handoff_count=len(view.threads_requiring_handoff),
        new_subtask_thread_ids=view.new_subtask_thread_ids,
    )


def _views(client: Client, projects: Collection[str] | None) -> list[ProjectDetail]:
    where, parameters = "1", {"limit": MAX_PROJECTS}
    if projects is not None:
        where, parameters["projects"] = "project_id IN {projects:Array(String)}", sorted(projects)
    sql = (
        f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {PROJECT_CONTEXT_RISK.name} FINAL WHERE {where}"
        " ORDER BY project_id LIMIT {limit:UInt32}"
    )
    return [project_detail(row) for row in client.query(sql, parameters=parameters).named_results()]


@router.get("/api/v1/projects", response_model=ProjectList, responses=errors(401))
async def list_projects(context: Context, caller: Reader) -> Response:
    """Roles: user, operator. Threads per level, the next compaction-risk thread, how many threads require a
    handoff, and where new subtasks should go, per project the caller sees (by project id)."""
    projects = None if caller.role is Role.OPERATOR else caller.projects
    views = await run_in_threadpool(_views, context.clickhouse, projects)
    return record_response(ProjectList(items=[summary(view) for view in views]))
