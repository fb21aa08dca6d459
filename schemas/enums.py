"""Enumerations of the contract. Values are exactly those of the spec (004 unless noted); never rename one."""

from __future__ import annotations

from enum import StrEnum


class SourceKind(StrEnum):
    """Where a snapshot's numbers come from (spec 3.2), in descending precedence."""

    CODEX_APP_SERVER = "codex_app_server"
    CODEX_SDK = "codex_sdk"
    WORKER_ESTIMATOR = "worker_estimator"


class ContextBudgetLevel(StrEnum):
    """Budget level (spec 3.2, thresholds in spec 4), from healthiest to most severe."""

    SAFE = "safe"
    WATCH = "watch"
    URGENT = "urgent"
    CRITICAL = "critical"


class PackageStatus(StrEnum):
    """Handoff package lifecycle (spec 3.3): draft -> ready -> consumed; expired by TTL."""

    DRAFT = "draft"
    READY = "ready"
    CONSUMED = "consumed"
    EXPIRED = "expired"


class AlertType(StrEnum):
    """Spec 3.4."""

    CONTEXT_WATCH = "context_watch"
    CONTEXT_URGENT = "context_urgent"
    CONTEXT_CRITICAL = "context_critical"
    COMPACTION_RISK = "compaction_risk"
    HANDOFF_MISSING = "handoff_missing"


class AlertStatus(StrEnum):
    """Spec 3.4."""

    OPENED = "opened"
    ACKED = "acked"
    RESOLVED = "resolved"


class AlertCommandKind(StrEnum):
    ACK = "ack"


class MasterActionState(StrEnum):
    """An issued master action's lifecycle: issued -> acknowledged -> done, or superseded at any open step."""

    ISSUED = "issued"
    ACKNOWLEDGED = "acknowledged"
    DONE = "done"
    SUPERSEDED = "superseded"


class MasterActionCommandKind(StrEnum):
    """What a worker or the master says about an action: it has seen it (ack), or it did it (done); or the master
    asks for one now (request: a handoff before the level would ask for it)."""

    ACK = "ack"
    DONE = "done"
    REQUEST = "request"


class MasterAction(StrEnum):
    """What the master agent asks of a thread (spec 4.1 actions table, 5.2 response).

    `prepare_handoff` and `avoid_large_context_append` are the spec's own names; the others name the remaining
    actions of the 4.1 table (and `compact_now`, the manual compaction of seed 000) in the same style.
    """

    REFRESH_STAGE_SUMMARY = "refresh_stage_summary"
    AVOID_LARGE_CONTEXT_APPEND = "avoid_large_context_append"
    PREPARE_HANDOFF = "prepare_handoff"
    FINISH_ATOMIC_SUBTASK = "finish_atomic_subtask"
    PRECREATE_RELAY_THREAD = "precreate_relay_thread"
    PRE_COMPACTION_WRAP_UP = "pre_compaction_wrap_up"
    FORBID_CONTEXT_GROWTH = "forbid_context_growth"
    COMPACT_NOW = "compact_now"


class ContextEventType(StrEnum):
    """Events written on every valid update (spec 5.3)."""

    UPDATED = "thread.context.updated"
    LEVEL_CHANGED = "thread.context.level_changed"
    COMPACTION_RISK_OPENED = "thread.context.compaction_risk_opened"
    COMPACTION_RISK_RESOLVED = "thread.context.compaction_risk_resolved"


class ClientEventType(StrEnum):
    """Server-sent events for the BFF's clients (spec 6.4)."""

    CONVERSATION_CONTEXT_INDICATOR_UPDATED = "conversation.context_indicator.updated"
    PROJECT_CONTEXT_RISK_UPDATED = "project.context_risk.updated"
    THREAD_HANDOFF_REQUIRED = "thread.handoff.required"
    THREAD_HANDOFF_READY = "thread.handoff.ready"
    THREAD_MASTER_ACTION_ISSUED = "thread.master_action.issued"
    """Not in spec 6.4: an issued master action (issue 21), for a master that listens instead of polling."""
    COMPACTION_POINT_MOVED = "tool.compaction_point.moved"
    """Not in spec 6.4: where the fleet sees a tool compact moved beyond its band (issue 37)."""


class ConversationType(StrEnum):
    """Kinds of conversation on the home list (spec 6.1, 7.1-7.3)."""

    SINGLE_DEVICE = "single_device"
    GROUP = "group"
    MASTER_AGENT = "master_agent"


class TriggerMode(StrEnum):
    """What started a compaction (seed 000 5.4)."""

    REQUEST_START = "request_start"
    MID_LOOP = "mid_loop"
    MANUAL = "manual"


class MessageRole(StrEnum):
    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"


class WorkFact(StrEnum):
    """Work-state facts that make `must_finish_before_compaction` true (spec 4.2, one per bullet)."""

    UNCOMMITTED_PATCH = "uncommitted_patch"
    UNRECORDED_TEST_RESULTS = "unrecorded_test_results"
    UNRECORDED_DECISIONS = "unrecorded_decisions"
    UNINTERRUPTIBLE_HARDWARE_STEP = "uninterruptible_hardware_step"
    AWAITING_CROSS_NODE_REPLY = "awaiting_cross_node_reply"
