"""`GET /api/v1/projects/{project_id}` (spec 6.2): a project's thread budgets, next risk, threads needing handoff."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api.deps import Context, Reader, not_found, path_id
from api.read_models import project_detail
from api.responses import errors, record_response
from schemas import ProjectDetail
from sinks.queries import project_risk

router = APIRouter(tags=["bff"])


@router.get("/api/v1/projects/{project_id}", response_model=ProjectDetail, responses=errors(401, 403, 404, 422))
async def get_project(
    project_id: Annotated[str, path_id("The project.")], context: Context, caller: Reader
) -> Response:
    if not caller.sees(project_id):
        raise not_found("project")
    row = await run_in_threadpool(project_risk, context.clickhouse, project_id)
    if row is None:
        raise not_found("project")
    return record_response(project_detail(row))
