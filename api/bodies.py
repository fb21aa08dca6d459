"""Request bodies: read with a size cap (413), validated strictly from the raw JSON bytes (422 with failing fields).

FastAPI would validate a body in python mode, where the contract's strict types reject every JSON string timestamp;
validating the bytes in JSON mode is what the Kafka codec does too, so the API and the topics accept the same records.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


BODY_TIMEOUT_SECONDS = 15.0
"""How long a whole body may take to arrive (ApiSettings.body_timeout_seconds): a slow body holds a connection."""


async def read_body(request: Request, limit: int, within_seconds: float = BODY_TIMEOUT_SECONDS) -> bytes:
    """The body, or 413 as soon as it (or its declared length) exceeds `limit` bytes (chunked bodies are counted),
    408 when it has not all arrived within `within_seconds`. A body the client aborts is one log line, not a
    traceback: nobody is left to answer."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    body = bytearray()
    try:
        async with asyncio.timeout(within_seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise too_large(limit)
    except TimeoutError as error:
        raise HTTPException(408, f"body not received within {within_seconds:g} s", {"Connection": "close"}) from error
    except ClientDisconnect as error:
        log.info("client aborted its request body: %s %s after %d bytes", request.method, request.url.path, len(body))
        raise HTTPException(400, "request body aborted") from error
    return bytes(body)


def too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"body larger than {limit} bytes")


def decode_body(model: type[M], body: bytes) -> M:
    """The validated model, or 422 in FastAPI's own error shape (`loc` starts with `body`), without echoing input."""
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError(field_errors(error, ("body",))) from error


def field_errors(error: ValidationError, prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"loc": [*prefix, *item["loc"]], "msg": item["msg"], "type": item["type"]}
        for item in error.errors(include_url=False, include_input=False, include_context=False)
    ]


def json_body_openapi(model: type[BaseModel] | str) -> dict[str, Any]:
    """`openapi_extra` documenting a body read by `decode_body` (the schema itself is added by `api.openapi`)."""
    name = model if isinstance(model, str) else model.__name__
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    }
