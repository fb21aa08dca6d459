"""Output records: context events (spec 5.3), client SSE events (spec 6.4), master actions, dead letters.

Every event has a stable `event_id` derived from what caused it, so a consumer that sees it twice can drop the repeat.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter, model_validator

from schemas.base import Count, Flag, Id, IdList, LongText, Name, Percent, Record, ShortText, Timestamp, TokenCount
from schemas.enums import (
    ClientEventType,
    ContextBudgetLevel,
    ContextEventType,
    MasterAction,
    MasterActionState,
    TriggerMode,
)
from schemas.snapshot import ThreadContextSnapshot
from schemas.views import ContextBudgetIndicator, WrapUpChecklist


class ContextEvent(Record):
    """A record on `context-events` [thread_id] (spec 5.3)."""

    event_id: Id
    event_type: ContextEventType
    thread_id: Id
    project_id: Id
    occurred_at: Timestamp
    context_budget_remaining_pct: Percent
    context_budget_level: ContextBudgetLevel
    previous_level: ContextBudgetLevel | None = Field(default=None, description="Set on level_changed.")
    snapshot_id: Id | None = Field(default=None, description="The snapshot that caused it, when one did.")
    reason: ShortText = ""

    @model_validator(mode="after")
    def _level_change_has_origin(self) -> ContextEvent:
        if self.event_type is ContextEventType.LEVEL_CHANGED and self.previous_level is None:
            raise ValueError("a level_changed event needs previous_level")
        return self


class MasterActionRecord(Record):
    """A record on `master-actions` [thread_id]: what the master agent must do for a thread, with its checklist.

    The engine issues one record per action and publishes every later state of it as a new version with the same
    `action_id`, so the topic (and its history table) is the action's whole lifecycle."""

    action_id: Id
    thread_id: Id
    project_id: Id
    context_budget_level: ContextBudgetLevel
    actions: Annotated[list[MasterAction], Field(min_length=1, max_length=len(MasterAction))]
    checklist: WrapUpChecklist = Field(default_factory=WrapUpChecklist)
    reason: ShortText = ""
    issued_at: Timestamp
    state: MasterActionState = MasterActionState.ISSUED
    state_changed_at: Timestamp | None = Field(default=None, description="When it reached `state` (unset: issued_at).")
    changed_by: ShortText = Field(default="", description="Who moved it there: `engine`, a worker or a caller.")
    state_reason: ShortText = Field(default="", description="Why, e.g. `handoff_ready`, `level_changed`, `compacted`.")


class CompactionFinished(Record):
    """One compaction of a thread, from `compaction_started` to `compaction_completed` (seed 000 5.4, spec 9.5).

    Published on `compactions` [thread_id] by the projection fold."""

    event_id: Id = Field(description="The `compaction_completed` session event's id.")
    thread_id: Id
    project_id: Id
    trigger_mode: TriggerMode
    model: Name | None = Field(default=None, description="Model of the thread's latest usage sample, when known.")
    model_profile: Name | None = Field(default=None, description="The profile that model maps to (codex, ...).")
    started_at: Timestamp | None = None
    completed_at: Timestamp
    tokens_before: TokenCount | None = None
    tokens_after: TokenCount | None = None
    summary_token_count: TokenCount | None = Field(default=None, description="Size of the compaction summary.")
    handoff_ready: Flag = Field(description="A ready handoff package existed for this cycle when it started.")
    wrap_up_requested: Flag = Field(
        default=False,
        description="A wrap-up (prepare_handoff / pre_compaction_wrap_up) was requested before it started.",
    )
    context_window_tokens: TokenCount | None = Field(
        default=None, description="Additive: the window the thread ran with, as the projection knew it."
    )
    tool_version: Name | None = Field(
        default=None, description="Additive: the agent tool's version, from the thread's latest usage sample."
    )


class SnapshotVerdict(Record):
    """A record on `snapshot-verdicts` [thread_id]: what the engine made of one snapshot it read.

    The history analysts read (`thread_context_snapshots`) holds the accepted ones; the input log beside it every
    one, with the reason a rejected one changed nothing."""

    snapshot: ThreadContextSnapshot
    accepted: Flag
    verdict: Name = Field(description="accept, not_newer (a duplicate or older version) or shadowed (a lower source).")


class _ClientEventBase(Record):
    event_id: Id
    occurred_at: Timestamp
    project_id: Id


class ConversationContextIndicatorUpdated(_ClientEventBase):
    event_type: Literal[ClientEventType.CONVERSATION_CONTEXT_INDICATOR_UPDATED] = (
        ClientEventType.CONVERSATION_CONTEXT_INDICATOR_UPDATED
    )
    conversation_id: Id
    context_budget_indicator: ContextBudgetIndicator
    context_budget_source_node_id: Id | None = None
    context_budget_updated_at: Timestamp | None = None
    must_finish_before_compaction: Flag = False


class ProjectContextRiskUpdated(_ClientEventBase):
    event_type: Literal[ClientEventType.PROJECT_CONTEXT_RISK_UPDATED] = ClientEventType.PROJECT_CONTEXT_RISK_UPDATED
    next_compaction_risk_thread_id: Id | None = None
    threads_requiring_handoff: IdList = Field(default_factory=list)
    master_context_strategy_summary: LongText = ""


class ThreadHandoffRequired(_ClientEventBase):
    event_type: Literal[ClientEventType.THREAD_HANDOFF_REQUIRED] = ClientEventType.THREAD_HANDOFF_REQUIRED
    thread_id: Id
    context_budget_level: ContextBudgetLevel
    reason: ShortText = ""


class ThreadHandoffReady(_ClientEventBase):
    event_type: Literal[ClientEventType.THREAD_HANDOFF_READY] = ClientEventType.THREAD_HANDOFF_READY
    thread_id: Id
    handoff_package_id: Id


class ThreadMasterActionIssued(_ClientEventBase):
    """Beside the four of spec 6.4: the engine issued an action for a thread, so a master hears it without polling."""

    event_type: Literal[ClientEventType.THREAD_MASTER_ACTION_ISSUED] = ClientEventType.THREAD_MASTER_ACTION_ISSUED
    thread_id: Id
    action_id: Id
    action: MasterAction
    context_budget_level: ContextBudgetLevel


class CompactionPointMoved(_ClientEventBase):
    """Beside the four of spec 6.4: the point where the fleet sees a tool compact moved beyond its band (issue 37).
    Sent to every project whose threads compacted on the key, since each of their budgets moves with it."""

    event_type: Literal[ClientEventType.COMPACTION_POINT_MOVED] = ClientEventType.COMPACTION_POINT_MOVED
    point_key: Name
    agent_tool: Name
    tool_version: ShortText = ""
    model: ShortText = ""
    context_window_tokens: TokenCount
    compaction_point_tokens: TokenCount
    previous_point_tokens: TokenCount
    compactions: Count = Field(description="Threshold compactions behind the new point.")
    since: Timestamp = Field(description="When the first of them completed.")
    reason: ShortText = Field(description="The move in words, e.g. `Claude Code 2.1.x on m now compacts at 177k ...`.")


ClientEvent = Annotated[
    ConversationContextIndicatorUpdated
    | ProjectContextRiskUpdated
    | ThreadHandoffRequired
    | ThreadHandoffReady
    | ThreadMasterActionIssued
    | CompactionPointMoved,
    Field(discriminator="event_type"),
]
"""A record on `client-events`: one server-sent event of spec 6.4 (its `event_type` is the SSE event name)."""
CLIENT_EVENT_ADAPTER: TypeAdapter[ClientEvent] = TypeAdapter(ClientEvent)


class DeadLetter(Record):
    """A record on `deadletter`: an input that could not be decoded or validated, kept whole with the reason.

    Key and value are the exact bytes received (base64 in JSON), so the record can be inspected and replayed.
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    source_topic: Name
    partition: Count
    offset: Count
    reason: ShortText = Field(description="Short machine-readable reason, e.g. `invalid_json`, `validation_error`.")
    detail: LongText = Field(default="", description="Human-readable explanation (the failing fields).")
    original_key: bytes | None = Field(default=None, description="The record key as received.")
    original_value: bytes | None = Field(description="The record value as received (null for a tombstone).")
    received_at: Timestamp
