"""`PUT /api/v1/threads/{thread_id}/task-importance`: the importance of a thread's task (spec 8.1 ranks by it).

Roles: user, operator (within the thread's project). The thread must be one the API knows
(`api.deps.visible_thread`: the thread book, else the stored row), so the importance is set for a project the caller
may see; an unknown or invisible thread answers 404. The record goes onto the compacted `task-importance` topic keyed
by thread, which the engine's routing folds into the thread's project view
(`streams.aggregates.routes.apply_importance`); the topic and the fold's changelog keep it across restarts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request, Response

from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Reader, path_id, visible_thread
from api.responses import errors, record_response
from api.views import TaskImportanceRequest
from core.topics import TASK_IMPORTANCE
from schemas.projects import TaskImportance

router = APIRouter(tags=["fleet"])

MAX_BODY_BYTES = 1024


@router.put(
    "/api/v1/threads/{thread_id}/task-importance",
    status_code=202,
    response_model=TaskImportance,
    responses=errors(401, 403, 404, 413, 422, 503),
    openapi_extra=json_body_openapi(TaskImportanceRequest),
)
async def put_task_importance(
    thread_id: Annotated[str, path_id("The thread whose task it is.")],
    request: Request,
    context: Context,
    caller: Reader,
) -> Response:
    """Roles: user, operator (within the thread's project). Higher importance ranks the thread first among threads
    of its project that are otherwise equal (same level, must-finish, facts and expected compaction minute)."""
    body = decode_body(
        TaskImportanceRequest, await read_body(request, MAX_BODY_BYTES, context.api.body_timeout_seconds)
    )
    thread = await visible_thread(context, caller, thread_id)
    record = TaskImportance(
        thread_id=thread_id,
        project_id=thread.project_id,
        task_importance=body.task_importance,
        set_by=caller.subject,
        set_at=datetime.now(UTC),
    )
    await context.publish(TASK_IMPORTANCE, thread_id, record)
    return record_response(record, 202)
