"""`POST /api/v1/threads/{thread_id}/handoff-requests` (issue 21): the master asks a thread for its handoff now.

Roles: user, operator (within the thread's project; another project's thread answers 404 like an unknown one). The
request is a `request` command on `master-action-commands` [thread_id]: the engine issues a `prepare_handoff` of the
thread's current cycle under the id the answer names, with the lifecycle every action has (GET
/api/v1/master-actions, 6.3 `pending_master_actions`), and a ready package for the cycle clears it. While one is open
already (by the thread book, else the stored row), the answer names that one and nothing is sent.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request, Response

from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Reader, path_id, visible_thread
from api.reads import action_items
from api.responses import errors, record_response
from api.views import HandoffRequest
from core.topics import MASTER_ACTION_COMMANDS
from schemas import MasterAction, MasterActionCommand, MasterActionCommandKind
from schemas.base import Id, Record

router = APIRouter(tags=["master-actions"])

MAX_BODY_BYTES = 8192


class HandoffRequestAccepted(Record):
    accepted: bool
    thread_id: Id
    action_id: Id
    requested: bool
    """False when a prepare_handoff of this cycle was open already (`action_id` is that one)."""


OPTIONAL_BODY = json_body_openapi(HandoffRequest)
OPTIONAL_BODY["requestBody"]["required"] = False


@router.post(
    "/api/v1/threads/{thread_id}/handoff-requests",
    status_code=202,
    response_model=HandoffRequestAccepted,
    responses=errors(401, 403, 404, 413, 422, 503),
    openapi_extra=OPTIONAL_BODY,
)
async def request_handoff(
    thread_id: Annotated[str, path_id("The thread that should hand off.")],
    request: Request,
    context: Context,
    caller: Reader,
) -> Response:
    """Roles: user, operator (within the thread's project). A `prepare_handoff` for the thread's current cycle
    (optional body `{"reason": ...}`, passed on as the action's state reason)."""
    raw = await read_body(request, MAX_BODY_BYTES, context.api.body_timeout_seconds)
    body = decode_body(HandoffRequest, raw) if raw.strip() else HandoffRequest()
    thread = await visible_thread(context, caller, thread_id)
    if thread.known is not None:
        items = thread.known.actions.items if thread.known.actions else []
    else:
        items = action_items((thread.row or {}).get("master_action_items") or "[]")
    already = next((i for i in items if i.action is MasterAction.PREPARE_HANDOFF and i.open), None)
    if already is not None:
        answer = HandoffRequestAccepted(
            accepted=True, thread_id=thread_id, action_id=already.action_id, requested=False
        )
        return record_response(answer, 202)
    command = MasterActionCommand(
        action_id=f"handoff-request-{uuid.uuid4().hex}",
        thread_id=thread_id,
        command=MasterActionCommandKind.REQUEST,
        action=MasterAction.PREPARE_HANDOFF,
        issued_by=caller.subject,
        issued_at=datetime.now(UTC),
        note=body.reason,
    )
    await context.publish(MASTER_ACTION_COMMANDS, thread_id, command)
    answer = HandoffRequestAccepted(accepted=True, thread_id=thread_id, action_id=command.action_id, requested=True)
    return record_response(answer, 202)
