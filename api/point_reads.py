"""Reads of the fleet's compaction points (`compaction_points`, migration 11) and the key a thread is measured on."""

from __future__ import annotations

from collections.abc import Collection

from clickhouse_connect.driver.client import Client

from sinks.queries import Row, query_rows
from sinks.rows import VERSION_COLUMN
from sinks.tables import COMPACTION_POINTS, THREAD_CONTEXT_PROJECTION


def compaction_points(client: Client, projects: Collection[str] | None, point_key: str | None = None) -> list[Row]:
    """The points of `projects` (None: every point): the keys their threads compacted on, and the keys their threads
    are measured on (their projections'). The project filter is outside FINAL: `project_ids` grows between versions."""
    where: list[str] = []
    parameters: Row = {}
    if projects is not None:
        where.append(
            "(hasAny(project_ids, {projects:Array(String)}) OR point_key IN"
            f" (SELECT compaction_point_key FROM {THREAD_CONTEXT_PROJECTION.name} FINAL"
            "  WHERE project_id IN {projects:Array(String)} AND compaction_point_key IS NOT NULL))"
        )
        parameters["projects"] = sorted(projects)
    if point_key is not None:
        where.append("point_key = {point_key:String}")
        parameters["point_key"] = point_key
    sql = f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {COMPACTION_POINTS.name} FINAL"
    if where:
        sql = f"SELECT * FROM ({sql}) WHERE {' AND '.join(where)}"
    return query_rows(client, f"{sql} ORDER BY agent_tool, tool_version, model, context_window_tokens", **parameters)


def thread_point(client: Client, thread_id: str) -> Row | None:
    """The key the thread's projection measures it on and the point it measured against; None before a projection."""
    sql = (
        f"SELECT compaction_point_key, compaction_point_tokens FROM {THREAD_CONTEXT_PROJECTION.name} FINAL"
        " WHERE thread_id = {thread:String}"
    )
    rows = query_rows(client, sql, thread=thread_id)
    return rows[0] if rows else None
