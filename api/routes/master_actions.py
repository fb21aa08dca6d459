"""Master actions (issue 21): list them by project, thread and state; acknowledge or complete one.

Roles: the list, ack and done take user and operator tokens (within the token's projects; an operator sees all) and
worker tokens, limited to the threads that worker reports (as the engine's thread state names it): a worker that
reports straight to Kafka gets no 5.2 answer, so it lists its open actions here. An
action of a project the caller does not see answers 404, like an unknown one. Ack and done go to the engine on
`master-action-commands` [thread_id]: the engine owns the lifecycle, so a command that would not move the action
forward changes nothing there; the API answers 409 for one that is already finished, so a caller learns it without
waiting."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from api import action_reads
from api.deps import ID_PATTERN, Context, not_found, path_id, require
from api.responses import errors, record_response
from api.tokens import Principal, Role
from core.topics import MASTER_ACTION_COMMANDS
from schemas import MasterActionCommand, MasterActionCommandKind, MasterActionRecord, MasterActionState
from schemas.base import MAX_ID_LENGTH, Record
from schemas.master_actions import OPEN_ACTION_STATES
from sinks.queries import Row

router = APIRouter(tags=["master-actions"])

ActionMover = Annotated[Principal, require(Role.WORKER, Role.USER, Role.OPERATOR)]
"""Who lists and moves actions: the master (user, operator) or the worker of the action's thread."""

MAX_ACTIONS = 500
OptionalId = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]


class MasterActionPage(Record):
    items: Annotated[list[MasterActionRecord], Field(max_length=MAX_ACTIONS)]


class MasterActionCommandAccepted(Record):
    accepted: bool
    action_id: str
    command: MasterActionCommandKind


@router.get("/api/v1/master-actions", response_model=MasterActionPage, responses=errors(401, 404, 422))
async def list_master_actions(
    context: Context,
    caller: ActionMover,
    project_id: OptionalId = None,
    thread_id: OptionalId = None,
    state: Annotated[
        list[MasterActionState] | None, Query(description="Repeatable; `open` is issued + acknowledged.")
    ] = None,
    open_only: Annotated[bool, Query(alias="open", description="Only issued and acknowledged ones.")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_ACTIONS)] = 100,
) -> Response:
    """Roles: user, operator (within the token's projects); worker for the threads it reports. Each action once, in
    its latest state, newest issue first."""
    if project_id is not None and not caller.sees(project_id):
        raise not_found("project")
    projects = {project_id} if project_id else (None if caller.role is Role.OPERATOR else caller.projects)
    states = {*(state or ()), *(OPEN_ACTION_STATES if open_only else ())}
    rows = await run_in_threadpool(action_reads.actions, context.clickhouse, projects, thread_id, states, limit)
    if caller.role is Role.WORKER:
        rows = [row for row in rows if _reported_by(context, caller, row["thread_id"])]
    return record_response(MasterActionPage(items=[action_reads.record_of(row) for row in rows]))


ActionId = Annotated[str, path_id("The action (`action_id` of a master action record).")]


@router.post(
    "/api/v1/master-actions/{action_id}/ack",
    status_code=202,
    response_model=MasterActionCommandAccepted,
    responses=errors(401, 404, 409, 422, 503),
)
async def ack_master_action(action_id: ActionId, context: Context, caller: ActionMover) -> Response:
    """Roles: user, operator; worker for the threads it reports. Seen: issued -> acknowledged."""
    return await _command(context, caller, action_id, MasterActionCommandKind.ACK)


@router.post(
    "/api/v1/master-actions/{action_id}/done",
    status_code=202,
    response_model=MasterActionCommandAccepted,
    responses=errors(401, 404, 409, 422, 503),
)
async def complete_master_action(action_id: ActionId, context: Context, caller: ActionMover) -> Response:
    """Roles: user, operator; worker for the threads it reports. Done: issued or acknowledged -> done."""
    return await _command(context, caller, action_id, MasterActionCommandKind.DONE)


async def _command(context: Context, caller: Principal, action_id: str, kind: MasterActionCommandKind) -> Response:
    row = await run_in_threadpool(_visible_action, context, caller, action_id)
    if row["state"] not in OPEN_ACTION_STATES:
        raise HTTPException(409, f"the action is already {row['state']}")
    command = MasterActionCommand(
        action_id=action_id,
        thread_id=row["thread_id"],
        command=kind,
        issued_by=caller.subject,
        issued_at=datetime.now(UTC),
    )
    await context.publish(MASTER_ACTION_COMMANDS, command.thread_id, command)
    return record_response(MasterActionCommandAccepted(accepted=True, action_id=action_id, command=kind), 202)


def _visible_action(context: Context, caller: Principal, action_id: str) -> Row:
    row = action_reads.action(context.clickhouse, action_id)
    if row is None or not caller.sees(row["project_id"]):
        raise not_found("master action")
    if caller.role is Role.WORKER and not _reported_by(context, caller, row["thread_id"]):
        raise not_found("master action")
    return row


def _reported_by(context: Context, caller: Principal, thread_id: str) -> bool:
    known = context.kafka.threads.known(thread_id)
    return known is not None and known.worker_id == caller.subject
