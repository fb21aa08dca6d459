"""What a master reads to run the relay: handoff packages (spec 3.3) and alerts (spec 3.4), latest versions (FINAL)."""

from __future__ import annotations

from collections.abc import Collection

from clickhouse_connect.driver.client import Client

from schemas import AlertStatus, ContextAlert, HandoffPackage
from sinks.queries import Row, query_rows, scope_filter
from sinks.rows import VERSION_COLUMN
from sinks.tables import THREAD_CONTEXT_ALERTS, THREAD_HANDOFF_PACKAGES


def _package(row: Row) -> HandoffPackage:
    return HandoffPackage.model_validate({name: row[name] for name in HandoffPackage.model_fields if name in row})


def package(client: Client, package_id: str) -> HandoffPackage | None:
    sql = (
        f"SELECT * EXCEPT ({VERSION_COLUMN}) FROM {THREAD_HANDOFF_PACKAGES.name} FINAL"
        " WHERE handoff_package_id = {id:String}"
    )
    rows = query_rows(client, sql, id=package_id)
    return _package(rows[0]) if rows else None


def thread_packages(client: Client, thread_id: str, limit: int) -> list[HandoffPackage]:
    """The packages a thread handed off (from) or received (to), newest first; `to_thread_id` changes between
    versions, so it is matched outside the FINAL subquery."""
    sql = (
        f"SELECT * FROM (SELECT * EXCEPT ({VERSION_COLUMN}) FROM {THREAD_HANDOFF_PACKAGES.name} FINAL)"
        " WHERE from_thread_id = {id:String} OR to_thread_id = {id:String}"
        " ORDER BY created_at DESC, handoff_package_id LIMIT {limit:UInt32}"
    )
    return [_package(row) for row in query_rows(client, sql, id=thread_id, limit=limit)]


def alerts(
    client: Client,
    projects: Collection[str] | None,
    thread_id: str | None,
    statuses: Collection[AlertStatus],
    limit: int,
) -> list[ContextAlert]:
    """Alerts of `projects` (None: all), newest opened first; filters on the latest version of each alert."""
    where, parameters = scope_filter(projects, thread_id, limit)
    if statuses:
        where.append("alert_status IN {statuses:Array(String)}")
        parameters["statuses"] = sorted(s.value for s in statuses)
    sql = (
        f"SELECT * FROM (SELECT * EXCEPT ({VERSION_COLUMN}) FROM {THREAD_CONTEXT_ALERTS.name} FINAL)"
        f" WHERE {' AND '.join(where)} ORDER BY opened_at DESC, alert_id LIMIT {{limit:UInt32}}"
    )
    return [ContextAlert.model_validate(row) for row in query_rows(client, sql, **parameters)]
