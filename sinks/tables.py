"""The contract tables as row specs, and which topic feeds which tables (the DDL is in `sinks.migrations`).

Latest-state tables are `ReplacingMergeTree(version)` and `version` is the Kafka offset of the record the row came
from. Every table's key lives on one partition of its source topic (the topic is keyed by it, or by the thread that
owns it: an alert by alert_id, a package by its thread), so offsets rise strictly per key and follow the order in
which the topic itself says the newer value came later; for the compacted topics that is exactly the record
compaction keeps. The alternative, `updated_at` in ms, is the clock of whichever worker owned the partition: after a
rebalance a worker whose clock is behind writes a newer state with a lower version and the row would stick; and
alerts, packages and project views carry no single update time. Caveat: an offset is only comparable within one
partition of one topic, so re-creating a topic or changing its partition count means rebuilding these tables from
the compacted topics (TRUNCATE, then replay from the earliest offset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas import (
    CLIENT_EVENT_ADAPTER,
    Codec,
    ContextAlert,
    ContextEvent,
    ConversationItem,
    DeadLetter,
    HandoffPackage,
    MasterActionRecord,
    ProjectDetail,
    SnapshotVerdict,
    ThreadContextSnapshot,
    ThreadState,
    ThresholdPolicy,
)
from schemas.compaction_points import CompactionPoint
from schemas.events import CompactionFinished
from schemas.projection import ThreadProjection
from sinks.rows import TableSpec, as_json, columns, optional, stored

ENVELOPE = "schema_version"
"""Every record's version of its own shape: a table's shape is its migrations'."""

# -- latest state: ReplacingMergeTree(version), read with FINAL -------------------------------------------------------

THREAD_CONTEXT_LATEST = TableSpec(
    "thread_context_latest",
    stored(
        ThreadState,
        key="thread_id",
        skip=(
            ENVELOPE,
            # stored by the computed columns below, as readers take them
            "work_facts",
            "open_alerts",
            "handoff",
            "handoff_decision",
            "master_actions",
            # the engine's own bookkeeping, no reader's
            "alert_sequence",
            "handoff_required_sent",
            "requested_actions",
            "sources",
        ),
        active_work_facts=lambda s: [f.fact for f in s.work_facts if f.active],
        open_alert_ids=lambda s: [a.alert_id for a in s.open_alerts],
        handoff_package_id=lambda s: s.handoff and s.handoff.handoff_package_id,
        handoff_package_status=lambda s: s.handoff and s.handoff.package_status,
        master_action_items=as_json("master_actions"),
        handoff_decision_package_id=lambda s: s.handoff_decision and s.handoff_decision.handoff_package_id,
        handoff_decision_reason=lambda s: s.handoff_decision.reason if s.handoff_decision else "",
        wrap_up_checklist=as_json("wrap_up_checklist"),
    ),
    versioned=True,
)
"""Its forecast band, token and manifest columns stay at their defaults: the projection's view of a thread is its own
table (below), which `sinks.queries.latest_thread` lays over this one."""

THREAD_CONTEXT_PROJECTION = TableSpec(
    "thread_context_projection",
    stored(
        ThreadProjection,
        key="thread_id",
        # the estimates are history (thread_projection_history); the latest thread shows the forecast band
        skip=(ENVELOPE, "estimated_remaining_turns", "estimated_remaining_large_messages", "estimate_accuracy"),
        latest_manifest=as_json("latest_manifest"),
        updated_at=lambda p: p.updated_at,
    ),
    versioned=True,
)

THREAD_CONTEXT_ALERTS = TableSpec(
    "thread_context_alerts", stored(ContextAlert, key="alert_id", skip=(ENVELOPE,)), versioned=True
)

THREAD_HANDOFF_PACKAGES = TableSpec(
    "thread_handoff_packages", stored(HandoffPackage, key="handoff_package_id", skip=(ENVELOPE,)), versioned=True
)

CONVERSATION_INDICATORS = TableSpec(
    "conversation_indicators",
    stored(
        ConversationItem,
        key="conversation_id",
        skip=(ENVELOPE, "context_budget_indicator"),  # flattened into the indicator_ columns
        indicator_visible=lambda c: c.context_budget_indicator.visible,
        indicator_percent=lambda c: c.context_budget_indicator.percent,
        indicator_level=lambda c: c.context_budget_indicator.level,
        indicator_stale=lambda c: c.context_budget_indicator.stale,
    ),
    versioned=True,
)

PROJECT_CONTEXT_RISK = TableSpec(
    "project_context_risk",
    stored(
        ProjectDetail,
        key="project_id",
        skip=(ENVELOPE,),
        active_thread_count=lambda p: len(p.active_thread_contexts),
        active_thread_contexts=as_json("active_thread_contexts"),
    ),
    versioned=True,
)

THRESHOLD_POLICIES = TableSpec(
    "thread_context_threshold_policies", stored(ThresholdPolicy, key="project_id", skip=(ENVELOPE,)), versioned=True
)

COMPACTION_POINTS = TableSpec(
    "compaction_points",
    stored(
        CompactionPoint,
        key="point_key",
        skip=(ENVELOPE, "samples"),  # the evidence's tokens are its column; the samples' ids stay on the topic
        sample_tokens=lambda p: [s.tokens_before for s in p.samples],
    ),
    versioned=True,
)
"""The fleet's learned compaction point per (tool, version family, model, window), with its evidence."""

# -- history: MergeTree by month -----------------------------------------------------------------------------------

THREAD_CONTEXT_SNAPSHOTS = TableSpec("thread_context_snapshots", stored(ThreadContextSnapshot, key="snapshot_id"))
"""Every field of the report, its schema version included (a row round-trips to the snapshot)."""

SNAPSHOT_INPUT_FIELDS = (
    "snapshot_id",
    "project_id",
    "thread_id",
    "source_kind",
    "context_budget_remaining_pct",
    "context_budget_level",
    "snapshot_version",
    "captured_at",
)


def _of_snapshot(name: str) -> Callable[[SnapshotVerdict], Any]:
    return lambda verdict: getattr(verdict.snapshot, name)


THREAD_CONTEXT_SNAPSHOT_INPUTS = TableSpec(
    "thread_context_snapshot_inputs",
    columns(
        **{name: _of_snapshot(name) for name in SNAPSHOT_INPUT_FIELDS},
        accepted=lambda verdict: verdict.accepted,
        verdict=lambda verdict: verdict.verdict,
    ),
)
"""Every snapshot the engine read, with its verdict: the raw input log beside the accepted history."""

CONTEXT_EVENTS = TableSpec(
    "context_events",
    columns(
        "event_id",
        "event_type",
        "project_id",
        "occurred_at",
        # context events (spec 5.3) and client events (spec 6.4) share the table; the latter name no thread or level
        thread_id=lambda e: getattr(e, "thread_id", ""),
        conversation_id=optional("conversation_id"),
        context_budget_remaining_pct=optional("context_budget_remaining_pct"),
        context_budget_level=optional("context_budget_level"),
        previous_level=optional("previous_level"),
        snapshot_id=optional("snapshot_id"),
        reason=lambda e: getattr(e, "reason", ""),
        payload=as_json(),
    ),
)

ALERT_TRANSITIONS = TableSpec(
    "alert_transitions",
    stored(
        ContextAlert,
        key="alert_id",
        skip=(ENVELOPE,),
        transitioned_at=lambda a: a.resolved_at or a.acked_at or a.opened_at,
    ),
)

COMPACTION_EVENTS = TableSpec("compaction_events", stored(CompactionFinished, key="event_id", skip=(ENVELOPE,)))

THREAD_PROJECTION_HISTORY = TableSpec(
    "thread_projection_history",
    stored(
        ThreadProjection,
        key="thread_id",
        # the sample's time, the trigger mode and the manifest are the latest thread's (thread_context_projection)
        skip=(ENVELOPE, "sampled_at", "last_compaction_trigger_mode", "latest_manifest", "estimate_accuracy"),
        estimate_checks=lambda p: p.estimate_accuracy.checks,
        estimate_abs_error_tokens=lambda p: p.estimate_accuracy.abs_error_tokens,
        estimate_signed_error_tokens=lambda p: p.estimate_accuracy.signed_error_tokens,
        estimate_sampled_tokens=lambda p: p.estimate_accuracy.sampled_tokens,
    ),
)

MASTER_ACTIONS = TableSpec(
    "master_actions",
    stored(
        MasterActionRecord,
        key="action_id",
        skip=(ENVELOPE,),
        checklist=as_json("checklist"),
        # a record from before the lifecycle (or the projection's compact_now) reached its state when issued
        state_changed_at=lambda r: r.state_changed_at or r.issued_at,
    ),
)

DEADLETTER = TableSpec("deadletter", stored(DeadLetter, key="received_at", skip=(ENVELOPE,)))

TABLES: tuple[TableSpec, ...] = (
    THREAD_CONTEXT_LATEST,
    THREAD_CONTEXT_PROJECTION,
    THREAD_CONTEXT_ALERTS,
    THREAD_HANDOFF_PACKAGES,
    CONVERSATION_INDICATORS,
    PROJECT_CONTEXT_RISK,
    THRESHOLD_POLICIES,
    COMPACTION_POINTS,
    THREAD_CONTEXT_SNAPSHOTS,
    THREAD_CONTEXT_SNAPSHOT_INPUTS,
    CONTEXT_EVENTS,
    ALERT_TRANSITIONS,
    COMPACTION_EVENTS,
    MASTER_ACTIONS,
    THREAD_PROJECTION_HISTORY,
    DEADLETTER,
)

# -- routes: topic -> tables ------------------------------------------------------------------------------------------

Extract = Callable[[Any], Any]
"""The part of a decoded record a table stores (None: nothing for that table in this record)."""


@dataclass(frozen=True)
class Target:
    table: TableSpec
    extract: Extract | None = None


@dataclass(frozen=True)
class Route:
    """A topic the sinks consume: how its values decode and the tables each record goes to."""

    topic: str
    codec: Codec[Any]
    targets: tuple[Target, ...]


ROUTES: Mapping[str, Route] = {
    route.topic: route
    for route in (
        # The engine's package lifecycle (expiry included) is on thread-state; the package's thread keeps it on one
        # partition, so the offset is a version for it too.
        Route(
            "thread-state",
            Codec(ThreadState),
            (Target(THREAD_CONTEXT_LATEST), Target(THREAD_HANDOFF_PACKAGES, lambda s: s.handoff)),
        ),
        Route("alerts", Codec(ContextAlert), (Target(THREAD_CONTEXT_ALERTS), Target(ALERT_TRANSITIONS))),
        Route("conversation-indicators", Codec(ConversationItem), (Target(CONVERSATION_INDICATORS),)),
        Route("project-risk", Codec(ProjectDetail), (Target(PROJECT_CONTEXT_RISK),)),
        Route("policies", Codec(ThresholdPolicy), (Target(THRESHOLD_POLICIES),)),
        # The history holds what the engine accepted (a duplicate or a stale version is not history); the input
        # log every snapshot with its verdict.
        Route(
            "snapshot-verdicts",
            Codec(SnapshotVerdict),
            (
                Target(THREAD_CONTEXT_SNAPSHOTS, lambda v: v.snapshot if v.accepted else None),
                Target(THREAD_CONTEXT_SNAPSHOT_INPUTS),
            ),
        ),
        Route("context-events", Codec(ContextEvent), (Target(CONTEXT_EVENTS),)),
        Route("client-events", Codec(CLIENT_EVENT_ADAPTER), (Target(CONTEXT_EVENTS),)),
        Route("compactions", Codec(CompactionFinished), (Target(COMPACTION_EVENTS),)),
        Route(
            "thread-projections",
            Codec(ThreadProjection),
            (Target(THREAD_CONTEXT_PROJECTION), Target(THREAD_PROJECTION_HISTORY)),
        ),
        Route("master-actions", Codec(MasterActionRecord), (Target(MASTER_ACTIONS),)),
        Route("compaction-points", Codec(CompactionPoint), (Target(COMPACTION_POINTS),)),
        Route("deadletter", Codec(DeadLetter), (Target(DEADLETTER),)),
    )
}
