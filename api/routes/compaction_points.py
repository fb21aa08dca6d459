"""The fleet's compaction points with their evidence (issue 37, docs/compaction-points.md): `GET
/api/v1/compaction-points`, for the master and the page's "auto-compacts at 177k, learnt from 12 compactions since
14:02".

A point is learnt from every project's compactions and applies to every thread of its key, so it is no project's
own: a user sees the points of the keys its projects' threads compacted on or are measured on, and of the projects
concerned only its own; an operator sees every point and project.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from api import point_reads
from api.deps import ID_PATTERN, Context, Reader, not_found
from api.responses import errors, record_response
from api.tokens import Role
from schemas.base import MAX_ID_LENGTH, Count, Id, IdList, Name, Record, ShortText, Timestamp, TokenCount
from schemas.compaction_points import MAX_POINT_SAMPLES
from sinks.queries import Row, latest_thread

router = APIRouter(tags=["compaction points"])

MAX_POINTS = 10_000


class CompactionPointShown(Record):
    """A row of `compaction_points`: where the fleet sees one key compact, and the evidence."""

    point_key: Name = Field(description="`tool|version family|model|window`.")
    agent_tool: Name
    tool_version: ShortText = Field(description="The tool's version family (`2.1.x`); empty: unknown.")
    model: ShortText
    context_window_tokens: TokenCount
    default_point_tokens: TokenCount = Field(description="Where the tool's formula puts the point.")
    compaction_point_tokens: TokenCount | None = Field(
        description="The learnt point; null until enough threshold compactions (the formula's stands)."
    )
    band_low_tokens: TokenCount | None
    band_high_tokens: TokenCount | None = Field(description="A learnt point outside the band is a move.")
    sample_tokens: Annotated[list[TokenCount], Field(max_length=MAX_POINT_SAMPLES)] = Field(
        description="The tokens of the recent threshold compactions it is the median of, oldest first."
    )
    compactions: Count = Field(description="Threshold compactions behind the current point.")
    since: Timestamp | None = Field(description="When the first of them completed.")
    previous_point_tokens: TokenCount | None = Field(description="The point before the last move.")
    moved_at: Timestamp | None
    moves: Count
    project_ids: IdList = Field(description="The projects concerned that the caller sees.")
    updated_at: Timestamp


class ThreadPoint(Record):
    thread_id: Id
    point_key: Name | None = Field(description="The thread's key; null before the projection measured it.")
    compaction_point_tokens: TokenCount | None = Field(
        description="The point its budget is measured against: the fleet's learnt one of its key, else the formula's."
    )


class CompactionPoints(Record):
    points: Annotated[list[CompactionPointShown], Field(max_length=MAX_POINTS)]
    thread: ThreadPoint | None = Field(default=None, description="With `thread_id`: the thread's key and point.")


@router.get("/api/v1/compaction-points", response_model=CompactionPoints, responses=errors(401, 403, 404, 422))
async def compaction_points(
    context: Context,
    caller: Reader,
    thread_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_ID_LENGTH,
            pattern=ID_PATTERN,
            description="Only the point of this thread's key, with the point its budget is measured against.",
        ),
    ] = None,
) -> Response:
    """Roles: user, operator. The points learnt for the keys the caller's projects run on (an operator: every key),
    with their evidence: the compactions behind each, since when, the last move."""
    client = context.clickhouse
    projects = None if caller.role is Role.OPERATOR else caller.projects
    thread: ThreadPoint | None = None
    rows: list[Row] = []
    if thread_id is None:
        rows = await run_in_threadpool(point_reads.compaction_points, client, projects)
    else:
        row = await run_in_threadpool(latest_thread, client, thread_id)
        if row is None or not caller.sees(row["project_id"]):
            raise not_found("thread")
        measured = await run_in_threadpool(point_reads.thread_point, client, thread_id) or {}
        thread = ThreadPoint(
            thread_id=thread_id,
            point_key=measured.get("compaction_point_key"),
            compaction_point_tokens=measured.get("compaction_point_tokens"),
        )
        if thread.point_key is not None:  # a key the caller's thread runs on: the caller's to see
            rows = await run_in_threadpool(point_reads.compaction_points, client, None, thread.point_key)
    points = [
        CompactionPointShown.model_validate(
            row | {"project_ids": [p for p in row["project_ids"] if projects is None or p in projects]}
        )
        for row in rows
    ]
    return record_response(CompactionPoints(points=points, thread=thread))
