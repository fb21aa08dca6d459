"""Writes a master or an operator needed raw Kafka for (issue 21): the conversation registry, a project's threshold
policy, and a manual compaction request (seed 000 `compact_now`).

Roles: registering a conversation, setting a policy and moving a thread to another worker are operator-only (they
change what every user sees, or whose reports count); a compaction request takes user and operator tokens within the
thread's project. Each write is accepted once Kafka has
it, keyed as the topic declares, and the folds that own the state apply it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import Field

from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Operator, Reader, path_id, visible_thread
from api.responses import errors, record_response
from core.topics import CONVERSATIONS, POLICIES, SESSION_EVENTS
from schemas import CompactRequested, Conversation, ThreadWorkerMoved, ThresholdPolicy
from schemas.base import Id, Record, ShortText

router = APIRouter(tags=["fleet"])

MAX_BODY_BYTES = 16_384


class WorkerMove(Record):
    """Body of `PUT /api/v1/threads/{thread_id}/worker`."""

    worker_id: Id = Field(description="The worker the thread belongs to from now on.")
    reason: Annotated[ShortText, Field(min_length=1)] = Field(description="Why; kept with the move.")


class WriteAccepted(Record):
    accepted: bool
    topic: str
    key: str


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _path_matches(field: str, body_value: str, path_value: str) -> None:
    if body_value != path_value:
        raise RequestValidationError(
            [{"loc": ["body", field], "msg": f"does not match the {field} in the path", "type": "mismatch"}]
        )


async def _publish(context: Context, topic: str, key: str, record: Record) -> Response:
    await context.publish(topic, key, record)
    return record_response(WriteAccepted(accepted=True, topic=topic, key=key), 202)


@router.put(
    "/api/v1/conversations/{conversation_id}",
    status_code=202,
    response_model=WriteAccepted,
    responses=errors(401, 403, 413, 422, 503),
    openapi_extra=json_body_openapi(Conversation),
)
async def put_conversation(
    conversation_id: Annotated[str, path_id("The conversation.")], request: Request, context: Context, caller: Operator
) -> Response:
    """Roles: operator. Register or update a home-list conversation and the thread(s) it shows (spec 6.1, 7.3)."""
    conversation = decode_body(Conversation, await read_body(request, MAX_BODY_BYTES, context.api.body_timeout_seconds))
    _path_matches("conversation_id", conversation.conversation_id, conversation_id)
    return await _publish(context, CONVERSATIONS, conversation_id, conversation)


@router.put(
    "/api/v1/projects/{project_id}/threshold-policy",
    status_code=202,
    response_model=WriteAccepted,
    responses=errors(401, 403, 413, 422, 503),
    openapi_extra=json_body_openapi(ThresholdPolicy),
)
async def put_threshold_policy(
    project_id: Annotated[str, path_id("The project (`*` for the default policy).")],
    request: Request,
    context: Context,
    caller: Operator,
) -> Response:
    """Roles: operator. The project's level thresholds (spec 4); the engine classifies with it from then on."""
    policy = decode_body(ThresholdPolicy, await read_body(request, MAX_BODY_BYTES, context.api.body_timeout_seconds))
    _path_matches("project_id", policy.project_id, project_id)
    return await _publish(context, POLICIES, project_id, policy)


@router.post(
    "/api/v1/threads/{thread_id}/compaction-requests",
    status_code=202,
    response_model=WriteAccepted,
    responses=errors(401, 403, 404, 422, 503),
)
async def request_compaction(
    thread_id: Annotated[str, path_id("The thread to compact.")], context: Context, caller: Reader
) -> Response:
    """Roles: user, operator (within the thread's project). A manual compaction request (seed 000 `compact_now`):
    a `compact_requested` session event, which the engine issues as a `compact_now` master action (open until the
    thread's compaction is observed)."""
    thread = await visible_thread(context, caller, thread_id)
    now = datetime.now(UTC)
    event = CompactRequested(
        thread_id=thread_id,
        event_id="compact-request-" + _digest(thread_id, caller.subject, now.isoformat()),
        occurred_at=now,
        project_id=thread.project_id,
        requested_by=caller.subject,
    )
    return await _publish(context, SESSION_EVENTS, thread_id, event)


@router.put(
    "/api/v1/threads/{thread_id}/worker",
    status_code=202,
    response_model=WriteAccepted,
    responses=errors(401, 403, 404, 409, 413, 422, 503),
    openapi_extra=json_body_openapi(WorkerMove),
)
async def move_thread(
    thread_id: Annotated[str, path_id("The thread to move.")], request: Request, context: Context, caller: Operator
) -> Response:
    """Roles: operator. Hand the thread to another worker (its first reporter is gone, or the work moved machines): a
    recorded `thread_worker_moved` session event naming from, to, who and why. Until the engine applies it, the old
    worker's reports still count and the new one's are refused (403 here, `worker_mismatch` in the engine)."""
    move = decode_body(WorkerMove, await read_body(request, MAX_BODY_BYTES, context.api.body_timeout_seconds))
    thread = await visible_thread(context, caller, thread_id)
    current = thread.known.worker_id if thread.known is not None else thread.row["worker_id"] if thread.row else None
    if current is None:
        raise HTTPException(409, "the thread's worker is not known yet")
    if current == move.worker_id:
        raise HTTPException(409, f"the thread already belongs to worker {current}")
    now = datetime.now(UTC)
    event = ThreadWorkerMoved(
        thread_id=thread_id,
        event_id="worker-move-" + _digest(thread_id, current, move.worker_id, now.isoformat()),
        occurred_at=now,
        project_id=thread.project_id,
        from_worker_id=current,
        to_worker_id=move.worker_id,
        moved_by=caller.subject,
        reason=move.reason,
    )
    return await _publish(context, SESSION_EVENTS, thread_id, event)
