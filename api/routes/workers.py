"""`POST /api/v1/workers/{worker_id}/thread-context` (spec 5.2): a worker reports one thread's budget."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError

from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Reporter, path_id, refuse_takeover, refuse_worker_takeover
from api.direct_route import DirectRoute
from api.reports import IDEMPOTENCY_KEY, SNAPSHOT_VERSION, InvalidIdentity, report_answer, snapshot_of
from api.responses import errors, record_response
from core.records import snapshot_record
from schemas import WorkerReportRequest, WorkerReportResponse
from schemas.admission import captured_at_refusal

# Served without FastAPI's per-request dependency solving: the hot path of every worker (api/direct_route.py).
router = APIRouter(tags=["workers"], route_class=DirectRoute)


@router.post(
    "/api/v1/workers/{worker_id}/thread-context",
    response_model=WorkerReportResponse,
    responses=errors(401, 403, 413, 422, 503),
    openapi_extra=json_body_openapi(WorkerReportRequest),
)
async def report_thread_context(
    worker_id: Annotated[str, path_id("The reporting worker; must be the token's subject and the body's worker_id.")],
    request: Request,
    context: Context,
    caller: Reporter,
    idempotency_key: Annotated[
        str | None, Header(alias=IDEMPOTENCY_KEY, description="The snapshot_id (derived from the body when absent).")
    ] = None,
    snapshot_version: Annotated[
        str | None, Header(alias=SNAPSHOT_VERSION, description="The snapshot_version (derived when absent).")
    ] = None,
) -> Response:
    """Accepted only once the snapshot is on `snapshots`; the answer classifies it with the engine's function."""
    if not caller.may_report_as(worker_id):
        raise HTTPException(403, "this token may not report for this worker")
    report = decode_body(
        WorkerReportRequest, await read_body(request, context.api.max_report_bytes, context.api.body_timeout_seconds)
    )
    if report.worker_id != worker_id:
        raise RequestValidationError(
            [{"loc": ["body", "worker_id"], "msg": "does not match the worker_id in the path", "type": "mismatch"}]
        )
    if not caller.sees(report.project_id):
        raise HTTPException(403, "this token may not report for this project")
    threads = context.kafka.threads
    known = threads.known(report.thread_id)
    refuse_takeover(known, report.project_id)
    refuse_worker_takeover(known, worker_id)
    refusal = captured_at_refusal(report.captured_at, datetime.now(UTC))
    if refusal is not None:
        raise RequestValidationError([{"loc": ["body", "captured_at"], "msg": refusal, "type": "value_error"}])
    try:
        snapshot = snapshot_of(report, idempotency_key, snapshot_version)
    except InvalidIdentity as error:
        raise RequestValidationError([{"loc": list(error.loc), "msg": str(error), "type": "value_error"}]) from error
    policy = context.kafka.policies.policy(snapshot.project_id)
    answer = report_answer(snapshot, policy, threads.verdict(snapshot), threads.actions(snapshot.thread_id))
    record = snapshot_record(snapshot, context.settings.topic_prefix)
    # Published even when not accepted: the engine decides, and a report it would keep is never lost to our guess.
    await context.kafka.publisher.publish(record.topic, record.key, record.value)
    threads.published(snapshot)
    return record_response(answer)
