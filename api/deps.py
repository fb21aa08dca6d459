"""What every route depends on: the app's collaborators, the caller, validated path ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from clickhouse_connect.driver.client import Client
from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.services import KafkaServices
from api.settings import ApiSettings
from api.tokens import InvalidToken, Principal, verify_token
from schemas.base import MAX_ID_LENGTH
from streams.settings import Settings


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    api: ApiSettings
    secret: bytes
    clickhouse: Client
    kafka: KafkaServices


async def api_context(request: Request) -> ApiContext:
    # async (as `caller`): FastAPI runs a plain `def` dependency in its threadpool, a thread hop per request
    return request.app.state.context


Context = Annotated[ApiContext, Depends(api_context)]

_bearer = HTTPBearer(auto_error=False, description="A JWT from `ctxbudget token` (see api/tokens.py).")


async def caller(
    context: Context, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The verified caller; 401 (with a Bearer challenge) for a missing, malformed, forged or expired token."""
    if credentials is None:
        raise _unauthorized("missing bearer token")
    try:
        return verify_token(context.secret, credentials.credentials)
    except InvalidToken as error:
        raise _unauthorized("invalid bearer token") from error


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": 'Bearer realm="ctxbudget"'})


Caller = Annotated[Principal, Depends(caller)]

ID_PATTERN = r"^\S+$"
"""The contract's entity id (schemas.base.Id): 1-128 characters, no whitespace."""


def path_id(description: str) -> object:
    return Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=description)


def not_found(what: str) -> HTTPException:
    """The answer for a resource that does not exist and for one the caller may not see: the same, so nothing leaks."""
    return HTTPException(404, f"{what} not found")
