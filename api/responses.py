"""JSON answers from contract records, encoded by pydantic's serializer (the same bytes as on the topics)."""

from __future__ import annotations

from typing import Any

from fastapi import Response
from pydantic import BaseModel

from schemas.codec import encode_record


def record_response(record: BaseModel, status_code: int = 200) -> Response:
    return Response(encode_record(record), status_code=status_code, media_type="application/json")


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route may give (all `{"detail": ...}`)."""
    described = {
        401: "Missing, malformed, forged or expired bearer token.",
        403: "The token's role may not do this.",
        404: "Unknown, or not visible to the caller (the two are not told apart).",
        413: "Body larger than the limit.",
        422: "Invalid path, query, header or body; `detail` lists the failing fields.",
        503: "Kafka did not acknowledge the write; retry after `Retry-After` seconds.",
    }
    return {code: {"description": described[code]} for code in codes}
