"""The engine's derived state of one thread: the value of its state table and of the compacted `thread-state` topic.

Everything a reader needs about a thread's budget is here, already classified by the engine (spec 9.6: one meaning
everywhere). The reported level is kept beside the engine's so disagreements stay visible.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.alert import ContextAlert
from schemas.base import Count, Flag, Id, Percent, Record, Seconds, ShortText, TextList, Timestamp, Version
from schemas.enums import ContextBudgetLevel, MasterAction, PackageStatus, SourceKind, WorkFact
from schemas.handoff import HandoffPackage
from schemas.master_actions import MasterActionItem
from schemas.views import WrapUpChecklist


class SourceMark(Record):
    """The newest snapshot seen from one source (accepted or not), so repeats and late arrivals change nothing."""

    source_kind: SourceKind
    snapshot_version: Version
    captured_at: Timestamp


class WorkFactState(Record):
    """The latest known state of one spec 4.2 fact for the thread, and when it changed.

    Resolved facts are kept (inactive) so that a replayed or late older event of the same fact changes nothing.
    """

    fact: WorkFact
    active: Flag
    changed_at: Timestamp
    detail: ShortText = ""
    files: TextList = Field(default_factory=list)


class HandoffDecision(Record):
    """The engine's verdict on the latest package it did not take as claimed: demoted to a draft, or rejected."""

    handoff_package_id: Id
    claimed_status: PackageStatus
    kept_status: PackageStatus | None = Field(default=None, description="None: rejected, the current package stays.")
    reason: ShortText


class ThreadState(Record):
    thread_id: Id
    project_id: Id
    task_id: Id | None = None
    node_id: Id
    worker_id: Id

    # The accepted snapshot
    source_kind: SourceKind
    snapshot_id: Id
    snapshot_version: Version
    captured_at: Timestamp
    context_budget_remaining_pct: Percent
    reported_level: ContextBudgetLevel = Field(description="The level as the worker reported it.")
    context_budget_level: ContextBudgetLevel = Field(description="The engine's level: the one everyone reads.")
    compaction_expected_at: Timestamp | None = None
    estimated_remaining_turns: Count | None = None
    estimated_remaining_large_messages: Count | None = None
    last_compaction_at: Timestamp | None = None
    compaction_count: Count = 0

    # Must-finish (spec 4.2): the worker's flag or any active work-state fact
    worker_must_finish: Flag = False
    work_facts: Annotated[list[WorkFactState], Field(max_length=len(WorkFact))] = Field(default_factory=list)
    must_finish_before_compaction: Flag = False

    # Report cadence (spec 5.1) and staleness
    next_required_report_in_seconds: Seconds
    report_deadline_at: Timestamp = Field(description="When the thread becomes stale without a newer report.")
    stale: Flag = False

    # Risk, alerts, handoff, master actions
    compaction_risk_open: Flag = False
    critical_since: Timestamp | None = None
    open_alerts: Annotated[list[ContextAlert], Field(max_length=16)] = Field(default_factory=list)
    alert_sequence: Count = Field(default=0, description="Alerts opened so far for this thread (stable alert ids).")
    handoff: HandoffPackage | None = Field(default=None, description="The thread's current handoff package.")
    handoff_decision: HandoffDecision | None = Field(
        default=None, description="Why the latest package was demoted or rejected; None once one is taken as claimed."
    )
    handoff_required_sent: Flag = Field(default=False, description="thread.handoff.required sent in this cycle.")
    due_actions: Annotated[list[MasterAction], Field(max_length=len(MasterAction))] = Field(default_factory=list)
    master_actions: Annotated[list[MasterActionItem], Field(max_length=len(MasterAction))] = Field(
        default_factory=list, description="The actions issued in this cycle that are still due, open or done."
    )
    requested_actions: Annotated[list[MasterAction], Field(max_length=len(MasterAction))] = Field(
        default_factory=list, description="Actions the master asked for in this cycle: due whatever the level."
    )
    wrap_up_checklist: WrapUpChecklist = Field(
        default_factory=WrapUpChecklist,
        description="The current spec 8.3 checklist from the thread's facts and package (the thread page shows it).",
    )
    wrap_up_requested: Flag = Field(
        default=False, description="prepare_handoff / pre_compaction_wrap_up was issued since the last compaction."
    )
    compaction_unprepared: Flag = Field(
        default=False, description="The last compaction came with no wrap-up action and no ready package (spec 9.5)."
    )

    sources: Annotated[list[SourceMark], Field(max_length=len(SourceKind))] = Field(default_factory=list)
    level_mismatches: Count = Field(default=0, description="Accepted snapshots whose reported level differed.")
    updated_at: Timestamp
