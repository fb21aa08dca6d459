"""A simulated fleet's week for the relay analytics page: threads of Codex, Claude Code and an unnamed tool whose
budgets run down and compact, with the master's prepare_handoff actions, packages (the agent's own or facts only) and
handoff_missing alerts, the relay getting better day by day. Deterministic (seeded); rows go in through the sinks' own
row specs and writer. The week ends today (UTC), as the page asks for the last days.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core.levels import classify_level
from reporter.relay.assembly import FACTS_ONLY_MARK
from schemas import (
    ContextAlert,
    ContextEvent,
    HandoffPackage,
    MasterActionRecord,
    Record,
    ThreadContextSnapshot,
    ThreadState,
)
from schemas.events import CompactionFinished
from sinks.rows import TableSpec
from sinks.tables import (
    COMPACTION_EVENTS,
    CONTEXT_EVENTS,
    MASTER_ACTIONS,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_LATEST,
    THREAD_CONTEXT_SNAPSHOTS,
    THREAD_HANDOFF_PACKAGES,
)
from sinks.writer import write_batch

DAYS = 7
TOOLS = [("codex", "gpt-5.3-codex")] * 4 + [("claude-code", "claude-sonnet-4-5")] * 4 + [(None, None)]
AGENT_PART = {"codex": 0.8, "claude-code": 0.5, None: 0.0}
"""How often a tool's package holds the agent's own summary (the rest: facts only)."""
STEP = timedelta(minutes=10)
HOURS_A_DAY = 6


@dataclass
class Fleet:
    project: str
    threads: list[str]
    compactions: int = 0
    marks: dict[str, Counter[str]] = field(default_factory=dict)
    """Per thread, how many marks of each kind its timeline has."""
    groups: set[tuple[str, str, str]] = field(default_factory=set)
    """(day, tool, model) of every row the relay view has for the project."""


def _write(client: Any, table: TableSpec, records: list[Record], token: str) -> None:
    for start in range(0, len(records), 5_000):
        chunk = records[start : start + 5_000]
        rows = [table.row(r, version) for version, r in enumerate(chunk, start + 1)]
        write_batch(client, table, rows, f"{token}-{start}")


def simulate(client: Any, project: str, tag: str, seed: int = 37) -> Fleet:
    rng = random.Random(seed)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=DAYS - 1)
    threads = [f"fleet-{i}-{tag}" for i in range(len(TOOLS))]
    fleet = Fleet(project, threads, marks={t: Counter() for t in threads})
    out: dict[str, list[Record]] = {name: [] for name in ("events", "compactions", "actions", "packages", "alerts")}
    reports = []
    for index, (thread, (tool, model)) in enumerate(zip(threads, TOOLS, strict=True)):
        reports.append(
            ThreadContextSnapshot(
                snapshot_id=f"s-{thread}",
                thread_id=thread,
                project_id=project,
                node_id="mac-01",
                worker_id=f"w-{index}",
                source_kind="codex_sdk",
                context_budget_remaining_pct=80.0,
                context_budget_level="safe",
                snapshot_version=1,
                captured_at=first,
                agent_tool=tool,
                model=model,
            )
        )
        for day in range(DAYS):
            ready_chance = 0.3 + 0.6 * day / (DAYS - 1)  # the relay gets better over the week
            start = first + timedelta(days=day, hours=7 + index % 5)
            _thread_day(rng, fleet, out, thread, tool, start, ready_chance)
            fleet.groups.add((start.date().isoformat(), tool or "unknown", model or "gpt-5-codex"))
    _write(client, THREAD_CONTEXT_SNAPSHOTS, reports, f"fleet-{tag}-reports")
    _write(client, CONTEXT_EVENTS, out["events"], f"fleet-{tag}-events")
    _write(client, COMPACTION_EVENTS, out["compactions"], f"fleet-{tag}-compactions")
    _write(client, MASTER_ACTIONS, out["actions"], f"fleet-{tag}-actions")
    _write(client, THREAD_HANDOFF_PACKAGES, out["packages"], f"fleet-{tag}-packages")
    _write(client, THREAD_CONTEXT_ALERTS, out["alerts"], f"fleet-{tag}-alerts")
    latest = [
        ThreadState(
            thread_id=thread,
            project_id=project,
            node_id="mac-01",
            worker_id=f"w-{i}",
            source_kind="codex_sdk",
            snapshot_id=f"s-{thread}",
            snapshot_version=1,
            captured_at=today,
            context_budget_remaining_pct=64.0,
            context_budget_level="watch",
            reported_level="watch",
            next_required_report_in_seconds=30,
            report_deadline_at=today + timedelta(minutes=1),
            updated_at=today,
        )
        for i, thread in enumerate(threads)
    ]
    _write(client, THREAD_CONTEXT_LATEST, latest, f"fleet-{tag}-latest")
    return fleet


def _thread_day(
    rng: random.Random,
    fleet: Fleet,
    out: dict[str, list[Record]],
    thread: str,
    tool: str | None,
    start: datetime,
    ready_chance: float,
) -> None:
    """One working day of a thread: reports every STEP, a compaction whenever the budget runs out."""
    project, marks = fleet.project, fleet.marks[thread]
    pct, action, ready = 100.0, None, False
    for step in range(HOURS_A_DAY * 6 + 1):
        now = start + step * STEP
        out["events"].append(_updated(thread, project, now, pct))
        marks["budget"] += 1
        if classify_level(pct).value in ("urgent", "critical") and action is None:
            action = f"act-{thread}-{now:%m%d%H%M}"
            out["actions"].append(_action(action, thread, project, now, "issued"))
            marks["master_action"] += 1
            if rng.random() < ready_chance:
                ready_at = now + timedelta(seconds=rng.randint(30, 540))
                agent = rng.random() < AGENT_PART[tool]
                summary = "Parser refactored; next: the tests." if agent else f"{FACTS_ONLY_MARK}\nsrc/parser.py"
                out["packages"].append(_package(f"hp-{action}", thread, project, ready_at, summary))
                out["actions"].append(_action(action, thread, project, now, "done", ready_at, "handoff_ready"))
                marks["package"] += 1
                marks["master_action"] += 1
                ready = True
        pct -= rng.uniform(2.0, 7.0)
        if pct < 8:
            began = now + STEP / 2
            out["compactions"].append(_compaction(thread, project, began, ready))
            fleet.compactions += 1
            marks["compaction"] += 1
            if not ready:
                out["alerts"].append(_missing(thread, project, began))
            if action is not None and not ready:
                out["actions"].append(_action(action, thread, project, now, "superseded", began, "compacted"))
                marks["master_action"] += 1
            pct, action, ready = rng.uniform(88, 97), None, False
    # the day's last report: without the next one the engine marks the thread stale until the morning
    out["events"].append(_updated(thread, project, now + timedelta(seconds=90), pct, reason="stale"))
    marks["budget"] += 1


def _updated(thread: str, project: str, now: datetime, pct: float, reason: str = "") -> ContextEvent:
    return ContextEvent(
        event_id=f"{thread}:{now:%Y%m%d%H%M%S}",
        reason=reason,
        event_type="thread.context.updated",
        thread_id=thread,
        project_id=project,
        occurred_at=now,
        context_budget_remaining_pct=round(max(pct, 0.0), 1),
        context_budget_level=classify_level(pct),
    )


def _action(
    action_id: str, thread: str, project: str, issued: datetime, state: str, changed: datetime | None = None,
    reason: str = "",
) -> MasterActionRecord:  # fmt: skip
    return MasterActionRecord(
        action_id=action_id,
        thread_id=thread,
        project_id=project,
        context_budget_level="urgent",
        actions=["prepare_handoff"],
        issued_at=issued,
        state=state,
        state_changed_at=changed or issued,
        changed_by="engine",
        state_reason=reason,
    )


def _package(package_id: str, thread: str, project: str, ready_at: datetime, summary: str) -> HandoffPackage:
    return HandoffPackage(
        handoff_package_id=package_id,
        project_id=project,
        from_thread_id=thread,
        package_status="ready",
        summary_text=summary,
        created_at=ready_at - timedelta(seconds=20),
        ready_at=ready_at,
    )


def _compaction(thread: str, project: str, began: datetime, ready: bool) -> CompactionFinished:
    return CompactionFinished(
        event_id=f"cc-{thread}-{began:%m%d%H%M}",
        thread_id=thread,
        project_id=project,
        trigger_mode="mid_loop",
        model="gpt-5-codex",
        started_at=began,
        completed_at=began + timedelta(seconds=40),
        handoff_ready=ready,
    )


def _missing(thread: str, project: str, began: datetime) -> ContextAlert:
    return ContextAlert(
        alert_id=f"al-{thread}-{began:%m%d%H%M}",
        thread_id=thread,
        project_id=project,
        alert_type="handoff_missing",
        alert_status="opened",
        opened_at=began,
    )
