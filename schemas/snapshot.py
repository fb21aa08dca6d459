"""Thread context snapshots (spec 3.2) and the worker report API's request and response (spec 5.2)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from schemas.base import Count, Flag, Id, Name, Percent, Record, Seconds, ShortText, Timestamp, TokenCount, Version
from schemas.enums import ContextBudgetLevel, MasterAction, SourceKind
from schemas.master_actions import MasterActionItem


class WorkerReportRequest(Record):
    """Body of `POST /api/v1/workers/{worker_id}/thread-context` (spec 5.2): one thread's budget as a worker sees it."""

    node_id: Id
    worker_id: Id
    thread_id: Id
    project_id: Id
    task_id: Id | None = Field(default=None, description="The task the thread works on, when it has one.")
    source_kind: SourceKind
    context_budget_remaining_pct: Percent = Field(description="Safe room left before compaction, 0..100.")
    context_budget_level: ContextBudgetLevel = Field(
        description="The level as the worker classified it. Kept as reported; the engine's own level is authoritative."
    )
    compaction_expected_at: Timestamp | None = Field(default=None, description="Forecast instant of next compaction.")
    must_finish_before_compaction: Flag = False
    estimated_remaining_turns: Count | None = None
    estimated_remaining_large_messages: Count | None = None
    last_compaction_at: Timestamp | None = Field(default=None, description="Absent when the thread never compacted.")
    compaction_count: Count = 0
    captured_at: Timestamp
    agent_tool: Name | None = Field(
        default=None, description="Additive: the agent tool that runs the thread (codex, claude-code), when known."
    )
    model: Name | None = Field(default=None, description="Additive: the model of the thread's latest request.")
    shown_remaining_pct: Percent | None = Field(
        default=None,
        description="Additive: the percent left that the agent tool itself displays (its own formula, not the budget).",
    )
    context_tokens: TokenCount | None = Field(
        default=None,
        description="Additive: the tokens the agent tool compares with its compaction point (its last request's).",
    )
    context_window_tokens: TokenCount | None = Field(default=None, description="Additive: the window it runs with.")
    tool_version: Name | None = Field(default=None, description="Additive: the agent tool's version.")

    @model_validator(mode="after")
    def _compaction_facts_agree(self) -> WorkerReportRequest:
        if self.last_compaction_at is not None and self.compaction_count == 0:
            raise ValueError("last_compaction_at is set but compaction_count is 0")
        if self.last_compaction_at is not None and self.last_compaction_at > self.captured_at:
            raise ValueError("last_compaction_at is later than captured_at")
        return self


class ThreadContextSnapshot(WorkerReportRequest):
    """A snapshot on the `snapshots` topic (spec 3.2): the report plus its identity and per-thread version."""

    snapshot_id: Id
    snapshot_version: Version = Field(
        description="Monotonic per thread and source; a snapshot not newer than the stored one changes nothing."
    )


class WorkerReportResponse(Record):
    """Answer of the worker report API (spec 5.2)."""

    accepted: Flag
    reason: ShortText | None = Field(
        default=None,
        description="Why accepted is false: not_newer (a repeat, or not newer than the thread's newest snapshot of "
        "this source) or shadowed (a higher-precedence source of the thread is fresh). The engine drops it.",
    )
    thread_id: Id
    context_budget_level: ContextBudgetLevel = Field(description="The engine's classification, not the reported one.")
    next_required_report_in_seconds: Seconds = Field(description="Report cadence of spec 5.1: 30 / 15 / 5 by level.")
    master_actions: Annotated[list[MasterAction], Field(max_length=len(MasterAction))] = Field(
        description="The level's actions that are still open for this thread (done ones of this cycle left out)."
    )
    open_master_actions: Annotated[list[MasterActionItem], Field(max_length=len(MasterAction))] = Field(
        default_factory=list,
        description="Those of them the engine already issued, with the ids to acknowledge or complete them by.",
    )
