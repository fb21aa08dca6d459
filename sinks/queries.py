"""Read helpers over the latest-state tables for the BFF: one row per key, always (FINAL), parameterised queries only.

ReplacingMergeTree collapses a key's versions only when parts merge, so every read here uses FINAL. A filter on a
column that changes between versions (an alert's status) is applied outside the FINAL subquery: inside it could
match an older version of a row whose newest version no longer matches.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from clickhouse_connect.driver.client import Client

from sinks.rows import VERSION_COLUMN, TableSpec
from sinks.tables import (
    CONVERSATION_INDICATORS,
    PROJECT_CONTEXT_RISK,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_LATEST,
    THREAD_CONTEXT_PROJECTION,
)

Row = dict[str, Any]
MAX_PAGE = 500


def _latest(table: TableSpec, where: str) -> str:
    return f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {table.name} FINAL WHERE {where}"


def query_rows(client: Client, sql: str, **parameters: Any) -> list[Row]:
    """The rows of a parameterised query, as dicts by column name."""
    return list(client.query(sql, parameters=parameters).named_results())


def scope_filter(projects: Collection[str] | None, thread_id: str | None, limit: int) -> tuple[list[str], Row]:
    """WHERE terms and parameters for reads limited to `projects` (None: all) and optionally one thread."""
    where, parameters = ["1"], {"limit": limit}
    if projects is not None:
        where.append("project_id IN {projects:Array(String)}")
        parameters["projects"] = sorted(projects)
    if thread_id is not None:
        where.append("thread_id = {thread:String}")
        parameters["thread"] = thread_id
    return where, parameters


def latest_thread(client: Client, thread_id: str) -> Row | None:
    """The thread's latest context (every column of thread_context_latest), or None for an unknown thread, with the
    projection's view laid over it when there is one: projected and sampled tokens, window, forecast band, manifest."""
    rows = query_rows(client, _latest(THREAD_CONTEXT_LATEST, "thread_id = {thread_id:String}"), thread_id=thread_id)
    if not rows:
        return None
    projected = query_rows(
        client, _latest(THREAD_CONTEXT_PROJECTION, "thread_id = {thread_id:String}"), thread_id=thread_id
    )
    overlay = {k: v for k, v in projected[0].items() if k in PROJECTION_OVERLAY} if projected else {}
    return {**rows[0], **overlay}


PROJECTION_OVERLAY = frozenset(
    (
        "projected_tokens",
        "sampled_tokens",
        "sampled_at",
        "context_window_tokens",
        "compaction_expected_earliest_at",
        "compaction_expected_latest_at",
        "last_compaction_trigger_mode",
        "latest_manifest",
    )
)
"""thread_context_latest's columns whose values come from the projection (the engine's state does not carry them)."""


def project_threads(client: Client, project_id: str) -> list[Row]:
    """The project's threads, least budget left first (the next compaction risk leads)."""
    sql = _latest(THREAD_CONTEXT_LATEST, "project_id = {project_id:String}")
    return query_rows(client, f"{sql} ORDER BY context_budget_remaining_pct, thread_id", project_id=project_id)


def thread_alerts(client: Client, thread_id: str, *, open_only: bool = False) -> list[Row]:
    """The thread's alerts, oldest first; `open_only` leaves out resolved ones."""
    sql = f"SELECT * FROM ({_latest(THREAD_CONTEXT_ALERTS, 'thread_id = {thread_id:String}')})"
    if open_only:
        sql += " WHERE alert_status != 'resolved'"
    return query_rows(client, f"{sql} ORDER BY opened_at, alert_id", thread_id=thread_id)


def project_risk(client: Client, project_id: str) -> Row | None:
    """The project's risk view (spec 6.2), `active_thread_contexts` as JSON text, or None."""
    rows = query_rows(client, _latest(PROJECT_CONTEXT_RISK, "project_id = {project_id:String}"), project_id=project_id)
    return rows[0] if rows else None


def conversation_indicators(client: Client, *, limit: int = 50, offset: int = 0) -> list[Row]:
    """A page of the conversation list (spec 6.1): pinned first, then the latest reply first."""
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
    sql = (
        f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {CONVERSATION_INDICATORS.name} FINAL"
        " ORDER BY manual_pinned DESC, latest_reply_at DESC NULLS LAST, conversation_id"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt64}"
    )
    return query_rows(client, sql, limit=limit, offset=offset)
