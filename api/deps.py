"""What every route depends on: the app's collaborators, the caller and the roles it may have, validated path ids.

Access is declared per route, in its signature: `caller: Annotated[Principal, require(Role.USER, Role.OPERATOR)]`
is the verified caller when its token's role is one of those, and 403 (with a message naming the allowed roles)
for any other role, before the route body runs. Every route names its roles this way; none takes `caller` bare.
Which projects the caller sees is the route's own check (`Principal.sees`): a resource of another project answers
404, the same as a missing one.

The roles (spec 5.2, 6.x): a worker reports its threads, posts their handoff packages and reads them back (one
thread at a time, only those it reports); a user reads and acks within its projects; an operator may call
everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from clickhouse_connect.driver.client import Client
from fastapi import Depends, HTTPException, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.services import KafkaServices
from api.settings import ApiSettings
from api.thread_book import KnownThread
from api.tokens import InvalidToken, Principal, Role, verify_token
from core.settings import Settings
from schemas import Record
from schemas.base import ID_PATTERN, MAX_ID_LENGTH
from schemas.codec import encode_record
from sinks.queries import Row, latest_thread


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    api: ApiSettings
    secret: bytes
    clickhouse: Client
    kafka: KafkaServices

    async def publish(self, topic: str, key: str, record: Record) -> None:
        """Write `record` to the (unprefixed) `topic` under `key`; returns once Kafka acknowledged it (see
        api/publisher.py), so a route answers success only for a record durably written."""
        await self.kafka.publisher.publish(self.settings.topic(topic), key.encode(), encode_record(record))


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


def require(*roles: Role) -> DependsParam:
    """The dependency of a route callable by `roles` only: the verified caller, else 401 (no valid token) or 403."""
    allowed = frozenset(roles)
    names = ", ".join(sorted(role.value for role in allowed))

    # The caller verified here rather than as a dependency of its own: FastAPI solves every dependency afresh on
    # every request, and on the report route (spec 5.2) that solving cost as much as the route itself.
    async def authorized(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
    ) -> Principal:
        principal = await caller(request.app.state.context, credentials)
        if principal.role not in allowed:
            raise HTTPException(403, f"a {principal.role.value} token may not call this; allowed roles: {names}")
        return principal

    return Depends(authorized)


Reader = Annotated[Principal, require(Role.USER, Role.OPERATOR)]
"""Reads and acks of the conversation list, projects, threads and alerts (spec 6.1-6.4)."""
Reporter = Annotated[Principal, require(Role.WORKER, Role.OPERATOR)]
"""Worker writes: reports (spec 5.2) and the handoff packages of its threads (spec 3.3)."""
Operator = Annotated[Principal, require(Role.OPERATOR)]
"""Operations over every project."""
ThreadReader = Annotated[Principal, require(Role.WORKER, Role.USER, Role.OPERATOR)]
"""Reads of one thread and its handoff packages, and consuming a package: the master (user, operator), or the
worker that reports the thread (its hooks ask what the thread owes, and resume the next thread from a package)."""


def reports_thread(caller: Principal, worker_id: str | None) -> bool:
    """Whether a worker caller is the one reporting the thread (`worker_id`, None when unknown); other roles pass
    (their projects are the route's own check)."""
    return caller.role is not Role.WORKER or worker_id == caller.subject


def path_id(description: str) -> object:
    return Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=description)


def not_found(what: str) -> HTTPException:
    """The answer for a resource that does not exist and for one the caller may not see: the same, so nothing leaks."""
    return HTTPException(404, f"{what} not found")


@dataclass(frozen=True)
class VisibleThread:
    project_id: str
    known: KnownThread | None
    """The thread book's entry: it follows `thread-state`, so it knows a thread (and its open actions) before the
    sinks have written them."""
    row: Row | None
    """The latest stored row, read only when the book does not know the thread (an API that has not caught up)."""


async def visible_thread(context: ApiContext, caller: Principal, thread_id: str) -> VisibleThread:
    """The thread, when the caller sees its project; else 404, as for an unknown thread. Every route that writes
    for a thread finds it here."""
    known = context.kafka.threads.known(thread_id)
    row = None if known is not None else await run_in_threadpool(latest_thread, context.clickhouse, thread_id)
    project_id = known.project_id if known is not None else row["project_id"] if row is not None else None
    if project_id is None or not caller.sees(project_id):
        raise not_found("thread")
    return VisibleThread(project_id, known, row)


def refuse_takeover(known: KnownThread | None, project_id: str) -> None:
    """403 when a write names another project than the one its thread belongs to (the first it was reported under):
    a token of one project may not move another project's thread into its own."""
    if known is not None and known.project_id != project_id:
        raise HTTPException(403, "this thread belongs to another project; a thread stays in its first project")


def refuse_worker_takeover(known: KnownThread | None, worker_id: str) -> None:
    """403 when a report or event names another worker than the thread's (the first to report it, or the one an
    operator moved it to): the engine would dead-letter it (`worker_mismatch`), and it would hand the thread over."""
    if known is not None and known.worker_id != worker_id:
        raise HTTPException(
            403,
            f"this thread belongs to worker {known.worker_id}; only an operator moves it "
            "(PUT /api/v1/threads/{thread_id}/worker)",
        )
