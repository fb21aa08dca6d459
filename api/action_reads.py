"""Reads of master actions: each action's latest state from the `master_actions` history (one row per state)."""

from __future__ import annotations

from collections.abc import Collection

import orjson
from clickhouse_connect.driver.client import Client

from schemas import MasterActionRecord, MasterActionState
from sinks.queries import Row, query_rows, scope_filter
from sinks.tables import MASTER_ACTIONS

_LATEST_PER_ACTION = (
    f"SELECT * FROM {MASTER_ACTIONS.name} WHERE {{where}}"
    # a later state wins; at the same instant the further one (done after acknowledged after issued)
    " ORDER BY state_changed_at DESC, indexOf(['issued', 'acknowledged', 'done', 'superseded'], state) DESC"
    " LIMIT 1 BY action_id"
)


def action(client: Client, action_id: str) -> Row | None:
    rows = query_rows(client, _LATEST_PER_ACTION.format(where="action_id = {id:String}"), id=action_id)
    return rows[0] if rows else None


def actions(
    client: Client,
    projects: Collection[str] | None,
    thread_id: str | None,
    states: Collection[MasterActionState],
    limit: int,
) -> list[Row]:
    """The latest state of each action of `projects` (None: all), newest issue first; the state filter applies to
    that latest state, outside the per-action pick, so an action is never listed by a state it already left."""
    where, parameters = scope_filter(projects, thread_id, limit)
    outer = "1"
    if states:
        outer = "state IN {states:Array(String)}"
        parameters["states"] = sorted(s.value for s in states)
    sql = (
        f"SELECT * FROM ({_LATEST_PER_ACTION.format(where=' AND '.join(where))}) WHERE {outer}"
        " ORDER BY issued_at DESC, action_id LIMIT {limit:UInt32}"
    )
    return query_rows(client, sql, **parameters)


def record_of(row: Row) -> MasterActionRecord:
    """The stored row back into the record the engine published (the checklist kept as its JSON)."""
    body = {name: row[name] for name in MasterActionRecord.model_fields if name in row and name != "checklist"}
    body["checklist"] = orjson.Fragment(row["checklist"] or "{}")
    return MasterActionRecord.model_validate_json(orjson.dumps(body))
