"""`POST /api/v1/alerts/{alert_id}/ack`: acknowledge a context alert (spec 3.4) through `alert-commands`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api import reads
from api.deps import Context, Reader, not_found, path_id
from api.responses import errors, record_response
from api.views import AlertAckAccepted
from core.topics import ALERT_COMMANDS
from schemas import AlertCommand, AlertCommandKind

router = APIRouter(tags=["alerts"])


@router.post(
    "/api/v1/alerts/{alert_id}/ack",
    status_code=202,
    response_model=AlertAckAccepted,
    responses=errors(401, 403, 404, 422, 503),
)
async def ack_alert(alert_id: Annotated[str, path_id("The alert.")], context: Context, caller: Reader) -> Response:
    """Accepted once the command is on `alert-commands`; the engine moves the alert to `acked` (repeats are no-ops)."""
    row = await run_in_threadpool(reads.alert, context.clickhouse, alert_id)
    if row is None or not caller.sees(row["project_id"]):
        raise not_found("alert")
    command = AlertCommand(
        alert_id=alert_id,
        thread_id=row["thread_id"],
        command=AlertCommandKind.ACK,
        issued_by=caller.subject,
        issued_at=datetime.now(UTC),
    )
    await context.publish(ALERT_COMMANDS, alert_id, command)
    return record_response(AlertAckAccepted(accepted=True, alert_id=alert_id), 202)
