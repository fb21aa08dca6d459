"""`POST /api/v1/workers/{worker_id}/session-events`: a worker's session event, for workers that reach only the API.

Not in spec 5.2 (which carries snapshots only); the same rules as its report: the token's own worker, a project the
token sees and the thread's first project, `occurred_at` near the receiver's clock. The event is validated strictly
and published keyed by thread, as the reporter's Kafka route sends it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from api.bodies import field_errors, json_body_openapi, read_body
from api.deps import Context, Reporter, path_id, refuse_takeover
from api.responses import errors
from reporter.kafka_sink import event_record
from schemas import SESSION_EVENT_ADAPTER, SessionEvent
from schemas.admission import captured_at_refusal

router = APIRouter(tags=["workers"])


def _invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ["body", field], "msg": message, "type": "value_error"}])


@router.post(
    "/api/v1/workers/{worker_id}/session-events",
    status_code=202,
    responses=errors(401, 403, 413, 422, 503),
    openapi_extra=json_body_openapi("SessionEvent"),
)
async def post_session_event(
    worker_id: Annotated[str, path_id("The reporting worker; must be the token's subject.")],
    request: Request,
    context: Context,
    caller: Reporter,
) -> Response:
    """Accepted (202) once the event is on `session-events`; the projection and the engine consume it from there."""
    if not caller.may_report_as(worker_id):
        raise HTTPException(403, "this token may not report for this worker")
    # Events may carry a compaction summary or a surface text: bounded like a handoff package, not like a 5.2 report.
    body = await read_body(request, context.api.max_package_bytes, context.api.body_timeout_seconds)
    try:
        event: SessionEvent = SESSION_EVENT_ADAPTER.validate_json(body)
    except ValidationError as error:
        raise RequestValidationError(field_errors(error, ("body",))) from error
    if event.project_id is None:
        raise _invalid("project_id", "required here: the API admits events only for a project the token sees")
    if event.worker_id not in (None, worker_id):
        raise _invalid("worker_id", "does not match the worker_id in the path")
    if not caller.sees(event.project_id):
        raise HTTPException(403, "this token may not report for this project")
    refuse_takeover(context.kafka.threads.known(event.thread_id), event.project_id)
    refusal = captured_at_refusal(event.occurred_at, datetime.now(UTC), "occurred_at")
    if refusal is not None:
        raise _invalid("occurred_at", refusal)
    record = event_record(event.model_copy(update={"worker_id": worker_id}), context.settings.topic_prefix)
    await context.kafka.publisher.publish(record.topic, record.key, record.value)
    return Response(status_code=202)
