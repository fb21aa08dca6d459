"""The facts the relay schedule (core/relay_schedule.py) judges, read from ClickHouse, and its answers for the API.

A relay runs while its thread holds a draft or ready package (latest state, FINAL). A thread's relay history is the
latest consume of a package of the same work (from the thread, into it, or of its task) and, for a relay thread, its
first report since its package was consumed into it. Blocking: routes run these in FastAPI's threadpool.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from api.views import RelayEntry, RelayLimitsShown, RelaySchedule, SubtaskTarget
from core.relay_schedule import (
    RelayHistory,
    RelayLimits,
    RelayLoad,
    RelaySlot,
    futile_reason,
    place_subtask,
    schedule_relays,
)
from schemas import PackageStatus, ProjectDetail, ThresholdPolicy
from sinks.queries import Row, project_threads, query_rows
from sinks.rows import VERSION_COLUMN
from sinks.tables import THREAD_CONTEXT_LATEST, THREAD_CONTEXT_SNAPSHOTS, THREAD_HANDOFF_PACKAGES

RELAYING = (PackageStatus.DRAFT.value, PackageStatus.READY.value)
"""Package statuses of a relay under way: prepared (or being prepared), not consumed yet."""

_CONSUMED = (
    f"SELECT from_thread_id, to_thread_id, task_id, consumed_at FROM"
    f" (SELECT * EXCEPT ({VERSION_COLUMN}) FROM {THREAD_HANDOFF_PACKAGES.name} FINAL WHERE project_id = {{p:String}})"
    " WHERE package_status = 'consumed' AND consumed_at IS NOT NULL"
)


def node_relays(client: Client, nodes: Collection[str]) -> dict[str, int]:
    """Relays running on each of `nodes`, over every project."""
    if not nodes:
        return {}
    sql = (
        f"SELECT node_id, count() AS relays FROM"
        f" (SELECT node_id, handoff_package_status FROM {THREAD_CONTEXT_LATEST.name} FINAL"
        " WHERE node_id IN {nodes:Array(String)})"
        " WHERE handoff_package_status IN {relaying:Array(String)} GROUP BY node_id"
    )
    rows = query_rows(client, sql, nodes=sorted(nodes), relaying=list(RELAYING))
    return {row["node_id"]: int(row["relays"]) for row in rows}


def relay_histories(client: Client, project_id: str, threads: Sequence[Row]) -> dict[str, RelayHistory]:
    """Each of `threads` (rows of thread_context_latest of the project) with the history of its relays."""
    consumed = query_rows(client, _CONSUMED, p=project_id)
    into: dict[str, datetime] = {}
    for row in consumed:
        if row["to_thread_id"]:
            into[row["to_thread_id"]] = max(row["consumed_at"], into.get(row["to_thread_id"], row["consumed_at"]))
    first = _first_pct_since(client, project_id, into)
    histories = {}
    for thread in threads:
        thread_id, task_id = thread["thread_id"], thread.get("task_id")
        same_work = [
            row["consumed_at"]
            for row in consumed
            if thread_id in (row["from_thread_id"], row["to_thread_id"]) or (task_id and row["task_id"] == task_id)
        ]
        histories[thread_id] = RelayHistory(max(same_work, default=None), first.get(thread_id))
    return histories


def _first_pct_since(client: Client, project_id: str, since: dict[str, datetime]) -> dict[str, float]:
    """Each relay thread's first reported percent at or after the consume into it."""
    if not since:
        return {}
    ids = sorted(since)
    sql = (
        "SELECT thread_id, argMin(context_budget_remaining_pct, captured_at) AS pct"
        f" FROM {THREAD_CONTEXT_SNAPSHOTS.name}"
        " WHERE project_id = {p:String} AND thread_id IN {ids:Array(String)}"
        " AND captured_at >= {since:Array(DateTime64(3, 'UTC'))}[indexOf({ids:Array(String)}, thread_id)]"
        " GROUP BY thread_id"
    )
    rows = query_rows(client, sql, p=project_id, ids=ids, since=[since[i] for i in ids])
    return {row["thread_id"]: float(row["pct"]) for row in rows}


def project_schedule(
    client: Client, detail: ProjectDetail, policy: ThresholdPolicy, limits: RelayLimits, now: datetime | None = None
) -> RelaySchedule:
    """The project's relays under the caps: running, and a verdict for each thread requiring a handoff in the
    view's order (spec 8.1), with where new subtasks go."""
    now = now or datetime.now(UTC)
    rows = {row["thread_id"]: row for row in project_threads(client, detail.project_id)}
    running = [t for t, row in rows.items() if row.get("handoff_package_status") in RELAYING]
    requiring = set(detail.threads_requiring_handoff) - set(running)
    wanting = [
        RelaySlot(detail.project_id, t.thread_id, t.node_id)
        for t in detail.active_thread_contexts
        if t.thread_id in requiring
    ]
    nodes = node_relays(client, {t.node_id for t in detail.active_thread_contexts})
    histories = relay_histories(client, detail.project_id, [rows[s.thread_id] for s in wanting if s.thread_id in rows])
    futile = {
        thread_id: reason
        for thread_id, history in histories.items()
        if (reason := futile_reason(history, policy.safe_min_pct, now, limits.repeat_seconds))
    }
    load = RelayLoad(nodes, {detail.project_id: len(running)})
    placement = place_subtask(detail.active_thread_contexts, running)
    return RelaySchedule(
        project_id=detail.project_id,
        limits=RelayLimitsShown(
            per_node=limits.per_node, per_project=limits.per_project, repeat_seconds=limits.repeat_seconds
        ),
        running=running,
        node_relays=nodes,
        relays=[
            RelayEntry(
                thread_id=d.slot.thread_id,
                node_id=d.slot.node_id,
                verdict=d.verdict,
                reason=d.reason,
                queue_position=d.queue_position,
            )
            for d in schedule_relays(wanting, load, limits, futile)
        ],
        new_subtask=SubtaskTarget(thread_id=placement.thread_id, reason=placement.reason),
    )


def thread_futile_reason(client: Client, row: Row, policy: ThresholdPolicy, limits: RelayLimits) -> str:
    """Why relaying this thread (a row of thread_context_latest) again would be futile, or ""."""
    history = relay_histories(client, row["project_id"], [row])[row["thread_id"]]
    return futile_reason(history, policy.safe_min_pct, datetime.now(UTC), limits.repeat_seconds) or ""
