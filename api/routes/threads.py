"""A thread's budget detail (spec 6.3) and its handoff packages (spec 3.3) from the master agent or the app."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from api import reads
from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Reporter, ThreadReader, not_found, path_id, refuse_takeover, reports_thread
from api.packages import package_outcome
from api.read_models import thread_detail
from api.relay_schedule import thread_futile_reason
from api.responses import errors, record_response
from api.tokens import Principal, Role
from api.views import MAX_RECENT_COMPACTIONS, HandoffPackageAccepted, ThreadContextDetail
from core.topics import HANDOFF_PACKAGES
from schemas import HandoffPackage
from sinks.queries import latest_thread

router = APIRouter(tags=["threads"])

ThreadId = Annotated[str, path_id("The thread.")]


@router.get(
    "/api/v1/threads/{thread_id}/context-budget",
    response_model=ThreadContextDetail,
    responses=errors(401, 403, 404, 422),
)
async def get_context_budget(thread_id: ThreadId, context: Context, caller: ThreadReader) -> Response:
    """Roles: user, operator (within the token's projects); worker for the threads it reports. Percent, level,
    expected compaction with its band, last compaction, wrap-up checklist, handoff status, open master actions, and
    `futile_relay_reason` when relaying its work again would not help."""
    detail = await run_in_threadpool(_thread_detail, context, caller, thread_id)
    if detail is None:
        raise not_found("thread")
    return record_response(detail)


def _thread_detail(context: Context, caller: Principal, thread_id: str) -> ThreadContextDetail | None:
    client = context.clickhouse
    row = latest_thread(client, thread_id)
    if row is None or not caller.sees(row["project_id"]) or not reports_thread(caller, row["worker_id"]):
        return None
    count, recent = reads.compactions(client, thread_id, MAX_RECENT_COMPACTIONS)
    tool = reads.agent_tools(client, [thread_id]).get(thread_id)
    detail = thread_detail(row, row.get("wrap_up_checklist") or None, count, recent, tool)
    policy = context.kafka.policies.policy(row["project_id"])
    futile = thread_futile_reason(client, row, policy, context.api.relay_limits)
    return detail.model_copy(update={"futile_relay_reason": futile}) if futile else detail


@router.post(
    "/api/v1/threads/{thread_id}/handoff-packages",
    status_code=202,
    response_model=HandoffPackageAccepted,
    responses=errors(401, 403, 409, 413, 422, 503),
    openapi_extra=json_body_openapi(HandoffPackage),
)
async def post_handoff_package(thread_id: ThreadId, request: Request, context: Context, caller: Reporter) -> Response:
    """A new version of the thread's package, on `handoff-packages` once Kafka has it; the engine runs its lifecycle."""
    package = decode_body(
        HandoffPackage, await read_body(request, context.api.max_package_bytes, context.api.body_timeout_seconds)
    )
    if package.from_thread_id != thread_id:
        raise RequestValidationError(
            [{"loc": ["body", "from_thread_id"], "msg": "does not match the thread_id in the path", "type": "mismatch"}]
        )
    if not caller.sees(package.project_id):
        raise HTTPException(403, "this token may not post packages for this project")
    known = context.kafka.threads.known(thread_id)
    refuse_takeover(known, package.project_id)
    if known is not None and caller.role is Role.WORKER and known.worker_id != caller.subject:
        raise HTTPException(403, "this token may not post packages for another worker's thread")
    outcome = package_outcome(known.handoff if known else None, package)
    if not outcome.kept:
        raise HTTPException(409, f"the engine would drop this package: {outcome.reason}")
    await context.publish(HANDOFF_PACKAGES, package.from_thread_id, package)
    answer = HandoffPackageAccepted(
        accepted=True,
        handoff_package_id=package.handoff_package_id,
        package_status=outcome.status,
        reason=outcome.reason,
    )
    return record_response(answer, 202)
