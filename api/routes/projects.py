"""`GET /api/v1/projects/{project_id}` (spec 6.2): a project's thread budgets, next risk, threads needing handoff."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api import reads
from api.deps import Context, Reader, not_found, path_id
from api.read_models import project_detail, project_view
from api.relay_schedule import project_schedule
from api.responses import errors, record_response
from api.views import ProjectContextView, RelaySchedule
from schemas import ProjectDetail
from sinks.queries import project_risk

router = APIRouter(tags=["bff"])


ProjectId = Annotated[str, path_id("The project.")]


@router.get("/api/v1/projects/{project_id}", response_model=ProjectContextView, responses=errors(401, 403, 404, 422))
async def get_project(project_id: ProjectId, context: Context, caller: Reader) -> Response:
    """Roles: user, operator (within the token's projects). Each thread also carries what its agent tool shows
    (`agent_tool`, `model`, `shown_remaining_pct`), as its own context budget does."""
    detail = await _project(context, caller.sees(project_id), project_id)
    ids = [thread.thread_id for thread in detail.active_thread_contexts]
    tools = await run_in_threadpool(reads.agent_tools, context.clickhouse, ids)
    return record_response(project_view(detail, tools))


@router.get(
    "/api/v1/projects/{project_id}/relay-schedule",
    response_model=RelaySchedule,
    responses=errors(401, 403, 404, 422),
)
async def get_relay_schedule(project_id: ProjectId, context: Context, caller: Reader) -> Response:
    """Roles: user, operator (within the token's projects). The master's relays of the project under the caps
    (issue 37): those running, and for each thread requiring a handoff, in the spec 8.1 order, whether to relay it
    now (`start`), let it wait for a free relay (`queued`, with its place) or not at all (`futile`), each with why;
    and where a new subtask should go (spec 8.2.4)."""
    detail = await _project(context, caller.sees(project_id), project_id)
    policy = context.kafka.policies.policy(project_id)
    schedule = await run_in_threadpool(project_schedule, context.clickhouse, detail, policy, context.api.relay_limits)
    return record_response(schedule)


async def _project(context: Context, seen: bool, project_id: str) -> ProjectDetail:
    """The project's 6.2 view; 404 for a project the caller may not see, like an unknown one."""
    row = await run_in_threadpool(project_risk, context.clickhouse, project_id) if seen else None
    if row is None:
        raise not_found("project")
    return project_detail(row)
