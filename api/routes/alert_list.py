"""`GET /api/v1/alerts` (issue 21): the alerts a caller may see, so that `POST .../{alert_id}/ack` has its ids."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from api import relay_reads
from api.deps import ID_PATTERN, Context, Reader, not_found
from api.responses import errors, record_response
from api.tokens import Role
from schemas import AlertStatus, ContextAlert
from schemas.base import MAX_ID_LENGTH, Record

router = APIRouter(tags=["alerts"])

MAX_ALERTS = 500
OptionalId = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]


class AlertPage(Record):
    items: Annotated[list[ContextAlert], Field(max_length=MAX_ALERTS)]


@router.get("/api/v1/alerts", response_model=AlertPage, responses=errors(401, 404, 422))
async def list_alerts(
    context: Context,
    caller: Reader,
    project_id: OptionalId = None,
    thread_id: OptionalId = None,
    status: Annotated[list[AlertStatus] | None, Query(description="Repeatable.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ALERTS)] = 100,
) -> Response:
    """Roles: user, operator (within the token's projects). Each alert in its latest status, newest first."""
    if project_id is not None and not caller.sees(project_id):
        raise not_found("project")
    projects = {project_id} if project_id else (None if caller.role is Role.OPERATOR else caller.projects)
    items = await run_in_threadpool(relay_reads.alerts, context.clickhouse, projects, thread_id, status or (), limit)
    return record_response(AlertPage(items=items))
