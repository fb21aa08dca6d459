"""Small builders for engine inputs, so each test states only what matters to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from core.levels import classify_level
from schemas import (
    AlertCommand,
    CompactionStarted,
    ContextBudgetLevel,
    HandoffPackage,
    MasterActionCommand,
    SourceKind,
    ThreadContextSnapshot,
    WorkFact,
    WorkFactChanged,
)

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
_versions = count(1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def snapshot(
    pct: float,
    *,
    thread: str = "thread-a",
    project: str = "proj-1",
    source: SourceKind = SourceKind.CODEX_APP_SERVER,
    version: int | None = None,
    seconds: float = 0,
    compactions: int = 0,
    must_finish: bool = False,
    expected_in: float | None = None,
    reported: ContextBudgetLevel | None = None,
) -> ThreadContextSnapshot:
    version = next(_versions) if version is None else version
    return ThreadContextSnapshot(
        snapshot_id=f"{thread}-{source.value}-{version}",
        snapshot_version=version,
        thread_id=thread,
        project_id=project,
        node_id="mac-01",
        worker_id="worker-mac-01",
        source_kind=source,
        context_budget_remaining_pct=pct,
        context_budget_level=reported or classify_level(pct),
        must_finish_before_compaction=must_finish,
        compaction_expected_at=at(seconds + expected_in) if expected_in is not None else None,
        compaction_count=compactions,
        last_compaction_at=at(seconds) if compactions else None,
        captured_at=at(seconds),
    )


def work_fact(fact: WorkFact, active: bool = True, *, thread: str = "thread-a", seconds: float = 0) -> WorkFactChanged:
    return WorkFactChanged(
        thread_id=thread,
        event_id=f"wf-{next(_versions)}",
        occurred_at=at(seconds),
        fact=fact,
        active=active,
        files=["src/line_b.py"],
        detail=f"{fact.value} detail",
    )


def package(
    status: str = "ready",
    *,
    thread: str = "thread-a",
    package_id: str = "hp-1",
    seconds: float = 0,
    complete: bool = True,
) -> HandoffPackage:
    checklist = (
        {
            "summary_text": "state of work",
            "critical_files": ["a.py"],
            "critical_commands": ["make"],
            "critical_tests": ["t::x"],
        }
        if complete
        else {"summary_text": "only a summary"}
    )
    return HandoffPackage(
        handoff_package_id=package_id,
        project_id="proj-1",
        from_thread_id=thread,
        package_status=status,
        created_at=at(seconds),
        ready_at=at(seconds) if status in ("ready", "consumed") else None,
        consumed_at=at(seconds) if status == "consumed" else None,
        **checklist,
    )


def compaction_started(*, thread: str = "thread-a", seconds: float = 0) -> CompactionStarted:
    return CompactionStarted(
        thread_id=thread, event_id=f"cs-{next(_versions)}", occurred_at=at(seconds), trigger_mode="request_start"
    )


def ack(alert_id: str, *, thread: str = "thread-a", seconds: float = 0) -> AlertCommand:
    return AlertCommand(alert_id=alert_id, thread_id=thread, command="ack", issued_by="master", issued_at=at(seconds))


def action_command(
    action_id: str, command: str = "ack", *, thread: str = "thread-a", seconds: float = 0, by: str = "master"
) -> MasterActionCommand:
    return MasterActionCommand(
        action_id=action_id, thread_id=thread, command=command, issued_by=by, issued_at=at(seconds)
    )
