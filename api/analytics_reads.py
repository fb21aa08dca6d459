"""Reads of the relay analytics views (migration 10) for the web page's plots, limited to the caller's projects."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from clickhouse_connect.driver.client import Client

from sinks.queries import Row, query_rows

RELAY_COLUMNS = (
    "day, project_id, agent_tool, model, compactions, with_ready_package, ready_package_share, with_agent_part,"
    " agent_part_share, packages, facts_only_packages, handoff_missing, prepare_handoff_issued,"
    " prepare_handoff_readied, ready_p50_seconds, ready_p99_seconds, thread_hours, compactions_per_thread_hour"
)
LEVEL_COLUMNS = "day, project_id, agent_tool, model, level, thread_hours"


def _daily(client: Client, view: str, columns: str, projects: Collection[str] | None, since: date) -> list[Row]:
    """The view's rows of `projects` (None: all) from `since` on, ordered by its columns, day first."""
    parameters: Row = {"since": since}
    scope = ""
    if projects is not None:
        scope = " AND project_id IN {projects:Array(String)}"
        parameters["projects"] = sorted(projects)
    sql = f"SELECT {columns} FROM {view} WHERE day >= {{since:Date}}{scope} ORDER BY {columns}"
    return query_rows(client, sql, **parameters)


def relay_daily(client: Client, projects: Collection[str] | None, since: date) -> list[Row]:
    """analytics_relay_daily: one row per day, project, agent tool and model."""
    return _daily(client, "analytics_relay_daily", RELAY_COLUMNS, projects, since)


def levels_daily(client: Client, projects: Collection[str] | None, since: date) -> list[Row]:
    """analytics_levels_daily: one row per day, project, agent tool, model and level."""
    return _daily(client, "analytics_levels_daily", LEVEL_COLUMNS, projects, since)


def thread_timeline(client: Client, project_id: str, thread_id: str, limit: int) -> list[Row]:
    """The thread's newest `limit` timeline points, oldest first (the project too: history is ordered by it first)."""
    sql = (
        "SELECT at, kind, ref, remaining_pct, label, detail FROM"
        " (SELECT * FROM analytics_thread_timeline WHERE project_id = {project:String} AND thread_id = {thread:String}"
        " ORDER BY at DESC, kind, ref, detail LIMIT {limit:UInt32})"
        " ORDER BY at, kind, ref, detail"
    )
    return query_rows(client, sql, project=project_id, thread=thread_id, limit=limit)
