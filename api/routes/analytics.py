"""The relay analytics of issue 37 for the web page's plots: the fleet's days (`GET /api/v1/analytics/relay`) and one
thread's timeline (`GET /api/v1/threads/{thread_id}/timeline`), read from the views of migration 10."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from api import analytics_reads
from api.deps import ID_PATTERN, Context, Reader, not_found, path_id
from api.responses import errors, record_response
from api.tokens import Role
from schemas.base import MAX_ID_LENGTH, Count, Id, Name, Record, ShortText, Timestamp
from schemas.enums import ContextBudgetLevel
from sinks.queries import latest_thread

router = APIRouter(tags=["analytics"])

MAX_DAYS = 366
MAX_TIMELINE_POINTS = 10_000
Share = Annotated[float, Field(ge=0, le=1)]


class RelayDay(Record):
    """A row of `analytics_relay_daily`: one UTC day of one project, agent tool and model (docs/analytics.md)."""

    day: date
    project_id: Id
    agent_tool: Name
    model: Name
    compactions: Count
    with_ready_package: Count
    ready_package_share: Share | None
    with_agent_part: Count
    agent_part_share: Share | None
    packages: Count
    facts_only_packages: Count
    handoff_missing: Count
    prepare_handoff_issued: Count
    prepare_handoff_readied: Count
    ready_p50_seconds: float | None
    ready_p99_seconds: float | None
    thread_hours: float
    compactions_per_thread_hour: float | None


class LevelDay(Record):
    """A row of `analytics_levels_daily`: hours of thread time at one engine level, or stale (not reporting)."""

    day: date
    project_id: Id
    agent_tool: Name
    model: Name
    level: ContextBudgetLevel | Literal["stale"]
    thread_hours: float


class RelayAnalytics(Record):
    since: date = Field(description="The first UTC day included.")
    relay: Annotated[list[RelayDay], Field(max_length=1_000_000)]
    levels: Annotated[list[LevelDay], Field(max_length=1_000_000)]


class TimelineKind(StrEnum):
    BUDGET = "budget"
    COMPACTION = "compaction"
    MASTER_ACTION = "master_action"
    PACKAGE = "package"


class TimelinePoint(Record):
    """A row of `analytics_thread_timeline`: the budget at an instant, or a mark on it."""

    at: Timestamp
    kind: TimelineKind
    ref: ShortText = Field(description="The event, action or package id.")
    remaining_pct: float | None = Field(description="The budget left (budget points only).")
    label: ShortText = Field(description="Level; trigger mode; action; package status.")
    detail: ShortText = Field(description="-; ready / no package; action state; facts_only / agent / empty.")


class ThreadTimeline(Record):
    thread_id: Id
    project_id: Id
    points: Annotated[list[TimelinePoint], Field(max_length=MAX_TIMELINE_POINTS)]
    truncated: bool = Field(description="Older points were left out (ask for a larger `limit`).")


OptionalId = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]


@router.get("/api/v1/analytics/relay", response_model=RelayAnalytics, responses=errors(401, 403, 404, 422))
async def relay_analytics(
    context: Context,
    caller: Reader,
    project_id: OptionalId = None,
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="UTC days up to today.")] = 30,
) -> Response:
    """Roles: user, operator (within the token's projects). Per day, project, agent tool and model: compactions and
    how many had a ready package and the agent's own part, packages and facts-only ones, handoff_missing incidents,
    prepare_handoff issued -> ready p50/p99, thread-hours; and hours per level."""
    if project_id is not None and not caller.sees(project_id):
        raise not_found("project")
    projects = {project_id} if project_id else (None if caller.role is Role.OPERATOR else caller.projects)
    since = datetime.now(UTC).date() - timedelta(days=days - 1)
    client = context.clickhouse
    relay = await run_in_threadpool(analytics_reads.relay_daily, client, projects, since)
    levels = await run_in_threadpool(analytics_reads.levels_daily, client, projects, since)
    answer = RelayAnalytics(
        since=since,
        relay=[RelayDay.model_validate(row) for row in relay],
        levels=[LevelDay.model_validate(row) for row in levels],
    )
    return record_response(answer)


@router.get("/api/v1/threads/{thread_id}/timeline", response_model=ThreadTimeline, responses=errors(401, 403, 404, 422))
async def thread_timeline(
    thread_id: Annotated[str, path_id("The thread.")],
    context: Context,
    caller: Reader,
    limit: Annotated[int, Query(ge=1, le=MAX_TIMELINE_POINTS)] = 2_000,
) -> Response:
    """Roles: user, operator (within the token's projects). The thread's budget over time with its compactions, master
    action states and packages, the newest `limit` points, oldest first."""
    row = await run_in_threadpool(latest_thread, context.clickhouse, thread_id)
    if row is None or not caller.sees(row["project_id"]):
        raise not_found("thread")
    project_id = row["project_id"]
    points = await run_in_threadpool(
        analytics_reads.thread_timeline, context.clickhouse, project_id, thread_id, limit + 1
    )
    answer = ThreadTimeline(
        thread_id=thread_id,
        project_id=project_id,
        points=[TimelinePoint.model_validate(p) for p in points[-limit:]],
        truncated=len(points) > limit,
    )
    return record_response(answer)
