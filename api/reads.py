"""The BFF's reads that `sinks.queries` does not have: project-scoped, keyset-paged, by alert or thread history.

Same rules as there: latest-state tables read with FINAL, filters on columns that may change between versions applied
outside the FINAL subquery, every value a query parameter. Blocking: routes run these in FastAPI's threadpool.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from clickhouse_connect.driver.client import Client
from pydantic import TypeAdapter

from api.cursor import NO_REPLY_RANK, SortKey
from api.views import THREAD_DETAIL_FROM_REPORT
from schemas import MasterActionItem
from sinks.queries import Row, query_rows
from sinks.rows import VERSION_COLUMN
from sinks.tables import COMPACTION_EVENTS, CONVERSATION_INDICATORS, THREAD_CONTEXT_ALERTS, THREAD_CONTEXT_SNAPSHOTS

_ITEMS: TypeAdapter[list[MasterActionItem]] = TypeAdapter(list[MasterActionItem])


def conversation_page(client: Client, projects: Collection[str] | None, after: SortKey | None, limit: int) -> list[Row]:
    """Up to `limit` conversations of `projects` (None: all) after the cursor key, in the list's order (spec 6.1)."""
    where = ["1"]
    parameters: dict[str, Any] = {"limit": limit}
    if projects is not None:
        where.append("project_id IN {projects:Array(String)}")
        parameters["projects"] = sorted(projects)
    if after is not None:
        where.append("(pin_rank, reply_rank, conversation_id) > ({pin:UInt8}, {reply:Int64}, {cid:String})")
        parameters |= {"pin": after.pin_rank, "reply": after.reply_rank, "cid": after.conversation_id}
    sql = (
        "SELECT * FROM ("
        f" SELECT * EXCEPT ({VERSION_COLUMN}), toUInt8(NOT manual_pinned) AS pin_rank,"
        f" if(isNull(latest_reply_at), toInt64({NO_REPLY_RANK}),"
        " -toUnixTimestamp64Milli(assumeNotNull(latest_reply_at))) AS reply_rank"
        f" FROM {CONVERSATION_INDICATORS.name} FINAL)"
        f" WHERE {' AND '.join(where)}"
        " ORDER BY pin_rank, reply_rank, conversation_id LIMIT {limit:UInt32}"
    )
    return query_rows(client, sql, **parameters)


def alert(client: Client, alert_id: str) -> Row | None:
    sql = f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {THREAD_CONTEXT_ALERTS.name} FINAL WHERE alert_id = {{id:String}}"
    rows = query_rows(client, sql, id=alert_id)
    return rows[0] if rows else None


def action_items(items_json: str) -> list[MasterActionItem]:
    return _ITEMS.validate_json(items_json or "[]")


def compactions(client: Client, thread_id: str, recent: int) -> tuple[int, list[Row]]:
    """How many compactions the thread had, and the latest `recent` of them, newest first (repeats dropped)."""
    table, parameters = COMPACTION_EVENTS.name, {"id": thread_id, "recent": recent}
    count_sql = f"SELECT uniqExact(event_id) FROM {table} WHERE thread_id = {{id:String}}"
    count = client.query(count_sql, parameters=parameters)
    sql = (
        f"SELECT * FROM {table} WHERE thread_id = {{id:String}}"
        " ORDER BY completed_at DESC, event_id LIMIT 1 BY event_id LIMIT {recent:UInt32}"
    )
    return int(count.result_rows[0][0]), query_rows(client, sql, **parameters)


def agent_tools(client: Client, thread_ids: Collection[str]) -> dict[str, Row]:
    """What each thread's latest report from its agent tool says (`THREAD_DETAIL_FROM_REPORT`), by thread: the
    tool's name, model and the percent it displays (the projection's own estimates, also snapshots, know none of
    them). A thread without such a report is missing."""
    sql = (
        f"SELECT thread_id, {', '.join(THREAD_DETAIL_FROM_REPORT)} FROM {THREAD_CONTEXT_SNAPSHOTS.name}"
        " WHERE thread_id IN {ids:Array(String)} AND shown_remaining_pct IS NOT NULL"
        " ORDER BY captured_at DESC, snapshot_version DESC LIMIT 1 BY thread_id"
    )
    return {row["thread_id"]: row for row in query_rows(client, sql, ids=sorted(thread_ids))} if thread_ids else {}
