"""Handoff packages for the master (issue 21, spec 3.3): read one whole, list a thread's, consume one into its relay.

Roles: user and operator (within the token's projects; an operator sees all): the master's reads and its consume; a
worker may read one package and consume it when it reports the thread the package came from (its SessionStart hook
and `ctxbudget handoff resume` start the next thread from it). A worker writes its packages through
`POST /api/v1/threads/{thread_id}/handoff-packages`. Another project's package, or for a worker another worker's,
answers 404, like an unknown one; a worker's consume into another worker's thread is 403. Consuming publishes the
package's next version (consumed, with `to_thread_id` and `consumed_at`) on `handoff-packages` [from_thread_id]; the
engine's lifecycle admits it only forward and keeps the first consume (api.thread_book holds this API's consumes until
the engine's state shows them, so the answer agrees)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import Field

from api import packages, relay_reads
from api.bodies import decode_body, json_body_openapi, read_body
from api.deps import Context, Reader, ThreadReader, not_found, path_id, reports_thread
from api.responses import errors, record_response
from api.tokens import Principal, Role
from api.views import ConsumeRequest
from core.topics import HANDOFF_PACKAGES
from schemas import HandoffPackage
from schemas.base import Record

router = APIRouter(tags=["handoff-packages"])

MAX_PACKAGES = 100
MAX_CONSUME_BYTES = 1024
PackageId = Annotated[str, path_id("The handoff package.")]


class HandoffPackagePage(Record):
    items: Annotated[list[HandoffPackage], Field(max_length=MAX_PACKAGES)]


@router.get("/api/v1/handoff-packages/{package_id}", response_model=HandoffPackage, responses=errors(401, 404, 422))
async def get_handoff_package(package_id: PackageId, context: Context, caller: ThreadReader) -> Response:
    """Roles: user, operator (within the token's projects); worker for the threads it reports. The whole spec 3.3
    record, latest version."""
    return record_response(await run_in_threadpool(_visible, context, caller, package_id))


@router.get(
    "/api/v1/threads/{thread_id}/handoff-packages", response_model=HandoffPackagePage, responses=errors(401, 422)
)
async def list_thread_packages(
    thread_id: Annotated[str, path_id("The thread, as `from_thread_id` or `to_thread_id`.")],
    context: Context,
    caller: Reader,
    limit: Annotated[int, Query(ge=1, le=MAX_PACKAGES)] = 20,
) -> Response:
    """Roles: user, operator. The packages the thread handed off or received that the caller may see."""
    packages = await run_in_threadpool(relay_reads.thread_packages, context.clickhouse, thread_id, limit)
    return record_response(HandoffPackagePage(items=[p for p in packages if caller.sees(p.project_id)]))


@router.post(
    "/api/v1/handoff-packages/{package_id}/consume",
    status_code=202,
    response_model=HandoffPackage,
    responses=errors(401, 403, 404, 409, 413, 422, 503),
    openapi_extra=json_body_openapi(ConsumeRequest),
)
async def consume_handoff_package(
    package_id: PackageId, request: Request, context: Context, caller: ThreadReader
) -> Response:
    """Roles: user, operator (within the token's projects); worker for the threads it reports. A ready package
    becomes consumed by the named relay thread, once: the first consume wins, a later one into another thread is
    409 with the thread that took it. The answer is the consumed version the engine applied (or, when it has not
    within `consume_verdict_seconds`, the one published); consuming it again into the same thread repeats it, the
    same `consumed_at`."""
    body = decode_body(ConsumeRequest, await read_body(request, MAX_CONSUME_BYTES, context.api.body_timeout_seconds))
    stored = await run_in_threadpool(_visible, context, caller, package_id)
    if body.to_thread_id == stored.from_thread_id:
        raise RequestValidationError(
            [
                {
                    "loc": ["body", "to_thread_id"],
                    "msg": "must be another thread than from_thread_id",
                    "type": "value_error",
                }
            ]
        )
    book = context.kafka.threads
    target = book.known(body.to_thread_id)
    if caller.role is Role.WORKER and target is not None and target.worker_id != caller.subject:
        raise HTTPException(403, f"thread {body.to_thread_id} belongs to another worker: no package is relayed there")
    try:  # from the newest version to the reservation, no await: two consumes in this API cannot both pass
        made = packages.consume(book.newest(stored), body.to_thread_id, datetime.now(UTC))
    except packages.ConsumeRefused as refused:
        raise HTTPException(409, str(refused)) from refused
    if made.new:
        book.reserve(made.package)
        try:
            await context.publish(HANDOFF_PACKAGES, made.package.from_thread_id, made.package)
        except BaseException:
            book.release(made.package)
            raise
    verdict = await book.finished(made.package, context.api.consume_verdict_seconds)
    if verdict is None:  # the engine has not applied it yet: the version published, which it will take first
        return record_response(made.package, 202)
    try:  # the engine's own: the first consume it applied, the same `consumed_at` on every repeat
        return record_response(packages.consume(verdict, body.to_thread_id, verdict.created_at).package, 202)
    except packages.ConsumeRefused as refused:
        raise HTTPException(409, str(refused)) from refused


def _visible(context: Context, caller: Principal, package_id: str) -> HandoffPackage:
    package = relay_reads.package(context.clickhouse, package_id)
    if package is None or not caller.sees(package.project_id):
        raise not_found("handoff package")
    known = context.kafka.threads.known(package.from_thread_id)
    if not reports_thread(caller, known.worker_id if known else None):
        raise not_found("handoff package")
    return package
