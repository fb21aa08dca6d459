"""`POST /api/v1/workers/{worker_id}/session-events`: a worker's session events, for workers that reach only the API.

Not in spec 5.2 (which carries snapshots only); the same rules as its report: the token's own worker, a project the
token sees and the thread's first project, `occurred_at` near the receiver's clock. The body is one event, or a JSON
array of them (a reporter tailing hundreds of threads sends what a round read in one request). Every event is
validated strictly and checked the same way; one refused event refuses the whole body (its index in the error's
`loc`) and nothing of it is published, so a sender may split the batch to find it. The events are published in
order, keyed by thread, as the reporter's Kafka route sends them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from api.bodies import field_errors, read_body
from api.deps import Context, Reporter, path_id, refuse_takeover, refuse_worker_takeover
from api.responses import errors
from api.tokens import Principal
from core.records import event_record
from schemas import SESSION_EVENT_ADAPTER, SessionEvent, ThreadWorkerMoved
from schemas.admission import captured_at_refusal

router = APIRouter(tags=["workers"])
_EVENTS_ADAPTER: TypeAdapter[list[SessionEvent]] = TypeAdapter(list[SessionEvent])
_EVENT_SCHEMA = {"$ref": "#/components/schemas/SessionEvent"}
_BODY_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"anyOf": [_EVENT_SCHEMA, {"type": "array", "items": _EVENT_SCHEMA, "minItems": 1}]}
            }
        },
    }
}


def _invalid(loc: tuple[Any, ...], field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": [*loc, field], "msg": message, "type": "value_error"}])


def _events(body: bytes) -> tuple[list[SessionEvent], bool]:
    """The body's events, and whether it was an array."""
    batch = body.lstrip()[:1] == b"["
    try:
        events = _EVENTS_ADAPTER.validate_json(body) if batch else [SESSION_EVENT_ADAPTER.validate_json(body)]
    except ValidationError as error:
        raise RequestValidationError(field_errors(error, ("body",))) from error
    if not events:
        raise RequestValidationError([{"loc": ["body"], "msg": "an empty array of events", "type": "value_error"}])
    return events, batch


def _admitted(event: SessionEvent, loc: tuple[Any, ...], worker_id: str, caller: Principal, context: Context) -> None:
    if isinstance(event, ThreadWorkerMoved):
        raise HTTPException(403, "a thread is moved by an operator: PUT /api/v1/threads/{thread_id}/worker")
    if event.project_id is None:
        raise _invalid(loc, "project_id", "required here: the API admits events only for a project the token sees")
    if event.worker_id not in (None, worker_id):
        raise _invalid(loc, "worker_id", "does not match the worker_id in the path")
    if not caller.sees(event.project_id):
        raise HTTPException(403, "this token may not report for this project")
    known = context.kafka.threads.known(event.thread_id)
    refuse_takeover(known, event.project_id)
    refuse_worker_takeover(known, worker_id)
    refusal = captured_at_refusal(event.occurred_at, datetime.now(UTC), "occurred_at")
    if refusal is not None:
        raise _invalid(loc, "occurred_at", refusal)


@router.post(
    "/api/v1/workers/{worker_id}/session-events",
    status_code=202,
    responses=errors(401, 403, 413, 422, 503),
    openapi_extra=_BODY_OPENAPI,
)
async def post_session_event(
    worker_id: Annotated[str, path_id("The reporting worker; must be the token's subject.")],
    request: Request,
    context: Context,
    caller: Reporter,
) -> Response:
    """Accepted (202) once every event is on `session-events`; the projection and the engine consume them there."""
    if not caller.may_report_as(worker_id):
        raise HTTPException(403, "this token may not report for this worker")
    # Events may carry a compaction summary or a surface text: bounded like a handoff package, not like a 5.2 report.
    body = await read_body(request, context.api.max_package_bytes, context.api.body_timeout_seconds)
    events, batch = _events(body)
    for index, event in enumerate(events):
        _admitted(event, ("body", index) if batch else ("body",), worker_id, caller, context)
    for event in events:
        record = event_record(event.model_copy(update={"worker_id": worker_id}), context.settings.topic_prefix)
        await context.kafka.publisher.publish(record.topic, record.key, record.value)
    return Response(status_code=202)
