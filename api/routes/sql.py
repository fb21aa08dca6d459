"""`POST /api/v1/sql`: one read-only query for analysts, run by the process that owns the database (api/sql.py).

Operator only: a query reads every project's rows, so no project-scoped token may call it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from api.bodies import read_body
from api.deps import Context, Operator
from api.responses import errors
from api.sql import SqlFormat, SqlLimits, SqlRefused, SqlUnavailable, run_readonly

router = APIRouter(tags=["analytics"])


@router.post(
    "/api/v1/sql",
    response_class=Response,
    responses={
        200: {"description": "The rows as ClickHouse formats them.", "content": {"text/plain": {}}},
        **errors(400, 401, 403, 413, 503),
    },
    openapi_extra={"requestBody": {"required": True, "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def run_sql(
    request: Request,
    context: Context,
    caller: Operator,
    format: Annotated[
        SqlFormat, Query(description="json: JSONEachRow; csv: CSVWithNames; tsv: TabSeparatedWithNames.")
    ] = SqlFormat.JSON,
) -> Response:
    """The body is one SELECT (UTF-8) over the pipeline's tables, run with ClickHouse's `readonly=1` and the configured
    row, byte, memory and time limits; anything else (a write, DDL, SET, SHOW, a second statement, a function or table
    function that reaches outside, `system.*` or another database) answers 400 with why (api/sql.py)."""
    body = await read_body(request, context.api.sql_max_query_bytes, context.api.body_timeout_seconds)
    try:
        query = body.decode()
    except UnicodeDecodeError as error:
        raise HTTPException(400, "the query is not UTF-8") from error
    api = context.api
    limits = SqlLimits(
        api.sql_max_result_rows, api.sql_max_execution_seconds, api.sql_max_result_bytes, api.sql_max_memory_bytes
    )
    try:
        result = await run_in_threadpool(run_readonly, context.settings.clickhouse_url, query, format, limits)
    except SqlRefused as error:
        raise HTTPException(400, str(error)) from error
    except SqlUnavailable as error:
        raise HTTPException(503, str(error)) from error
    return Response(result, media_type=format.media_type)
