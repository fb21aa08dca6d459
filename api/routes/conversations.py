"""`GET /api/v1/conversations` (spec 6.1): the home list with each conversation's ring marker."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from api import reads
from api.cursor import InvalidCursor, decode_cursor, encode_cursor
from api.deps import Context, Reader
from api.read_models import conversation_item, sort_key
from api.responses import errors, record_response
from api.tokens import Role
from api.views import ConversationPage
from sinks.queries import MAX_PAGE

router = APIRouter(tags=["bff"])

DEFAULT_PAGE = 50


@router.get("/api/v1/conversations", response_model=ConversationPage, responses=errors(401, 403, 422))
async def list_conversations(
    context: Context,
    caller: Reader,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=512, description="`next_cursor` of the previous page.")] = None,
) -> Response:
    """The caller's conversations (an operator's: all), pinned first, then the latest reply first."""
    try:
        after = decode_cursor(cursor) if cursor is not None else None
    except InvalidCursor as error:
        raise RequestValidationError(
            [{"loc": ["query", "cursor"], "msg": str(error), "type": "value_error"}]
        ) from error
    projects = None if caller.role is Role.OPERATOR else caller.projects
    rows = await run_in_threadpool(reads.conversation_page, context.clickhouse, projects, after, limit + 1)
    page = rows[:limit]
    next_cursor = encode_cursor(sort_key(page[-1])) if len(rows) > limit else None
    return record_response(ConversationPage(items=[conversation_item(r) for r in page], next_cursor=next_cursor))
