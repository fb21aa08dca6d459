"""`GET /api/v1/events`: the spec 6.4 server-sent events the caller may see, resumable with Last-Event-ID."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse

from api.deps import Context, Reader
from api.event_ids import InvalidEventId, decode_event_id
from api.events import event_stream
from api.responses import errors

router = APIRouter(tags=["bff"])

SSE_RESPONSE = {
    200: {
        "description": "`text/event-stream`: `event:` is the event_type of spec 6.4, `data:` the ClientEvent JSON, "
        "`id:` the stream position (see api/event_ids.py). Heartbeat comments carry the id too.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.get("/api/v1/events", response_class=StreamingResponse, responses={**SSE_RESPONSE, **errors(401, 403, 422)})
async def stream_events(
    context: Context,
    caller: Reader,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", max_length=32_768, description="Resume after this event.")
    ] = None,
) -> StreamingResponse:
    try:
        last_seen = decode_event_id(last_event_id) if last_event_id is not None else None
    except InvalidEventId as error:
        raise RequestValidationError(
            [{"loc": ["header", "Last-Event-ID"], "msg": str(error), "type": "value_error"}]
        ) from error
    body = event_stream(context.kafka.broadcaster, caller, last_seen, context.api.sse_heartbeat_seconds)
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
