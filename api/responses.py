"""JSON answers from contract records, encoded by pydantic's serializer, every instant in UTC.

One rule for every instant the API returns (reads, SSE, write answers): RFC 3339 in UTC with `Z`
(`2026-03-25T07:56:00Z`), whatever offset the worker reported it with; the instant itself never changes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from fastapi import Response
from pydantic import BaseModel

from schemas.codec import encode_record

M = TypeVar("M", bound=BaseModel)
ZERO = timedelta(0)


def in_utc(record: M) -> M:
    """The record with every instant in it (nested records and lists too) moved to UTC; `record` itself when every
    instant already is (most answers: copying each one cost more than encoding it)."""
    update = {name: moved for name, value in record if (moved := _utc(value)) is not value}
    return record.model_copy(update=update) if update else record


def _utc(value: Any) -> Any:
    """`value` with its instants in UTC; the same object when they already are (an offset of zero encodes as `Z`)."""
    if isinstance(value, datetime):
        return value if value.utcoffset() == ZERO else value.astimezone(UTC)
    if isinstance(value, BaseModel):
        return in_utc(value)
    if isinstance(value, list | tuple):
        items = [_utc(item) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else type(value)(items)
    return value


def utc_json(record: BaseModel) -> bytes:
    return encode_record(in_utc(record))


def record_response(record: BaseModel, status_code: int = 200) -> Response:
    return Response(utc_json(record), status_code=status_code, media_type="application/json")


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route may give (all `{"detail": ...}`)."""
    described = {
        400: "Refused by ClickHouse or by the endpoint; `detail` is the message.",
        401: "Missing, malformed, forged or expired bearer token.",
        403: "The token's role may not do this.",
        404: "Unknown, or not visible to the caller (the two are not told apart).",
        409: "Refused by a lifecycle: the engine would drop the record (an older package), or the resource is already "
        "past the state the request needs; `detail` says why.",
        413: "Body larger than the limit.",
        422: "Invalid path, query, header or body; `detail` lists the failing fields.",
        503: "A backing service (Kafka for writes, ClickHouse for SQL) is unavailable; retry later (`Retry-After`).",
    }
    return {code: {"description": described[code]} for code in codes}
