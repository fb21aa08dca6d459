"""The projection fold's per-thread state and the budget readings it emits (seed 003, seed 000, issue 6).

The state is the value of the projection table (keyed by thread_id) and lives in its changelog, so it is versioned:
`state_version` names the fold version that wrote it. `restore_state` reads any stored version. A state of this
version is taken as is; a state of another version (or one that no longer validates) keeps only its frozen core (the
raw usage sample, the compaction count, the reading sequence) with an empty surface, so the projection degrades to
the raw sample (projected = pressure) instead of vanishing, and the surface rebuilds from the next events (seed 003).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, Strict, ValidationError

from schemas.base import Count, Flag, Id, IdList, Name, Percent, Record, Timestamp, TokenCount, Version
from schemas.enums import ContextBudgetLevel, TriggerMode
from schemas.session_events import ContextManifest

PROJECTION_STATE_VERSION: Literal[1] = 1
"""Version of the fold that writes `ProjectionState`. Bump when the meaning of a stored field changes."""

CORE_FIELDS = (
    "thread_id",
    "project_id",
    "node_id",
    "worker_id",
    "sample",
    "compaction_count",
    "last_compaction_at",
    "readings_emitted",
    "updated_at",
)
"""Fields whose name and shape never change across fold versions: what a restored older state keeps."""

MAX_SURFACE_ENTRIES = 1_024
MAX_COMPACTION_HISTORY = 64
MAX_RECENT_EVENT_IDS = 4_096

SignedTotal = Annotated[int, Strict(), Field(ge=-(2**53), le=2**53)]
Rate = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A non-negative running statistic (tokens per turn, tokens per second, their variances)."""


class UsageAnchor(Record):
    """The latest provider usage sample: the exact anchor of the projection (seed 003 `pressureTokens`)."""

    event_id: Id
    occurred_at: Timestamp
    input_tokens: TokenCount
    model: Name | None = None
    context_window_tokens: TokenCount | None = None
    tool_version: Name | None = None


class SurfaceEntry(Record):
    """One surface addition (message, tool result or compaction summary) in arrival order."""

    event_id: Id = Field(description="The event that added it; for a merged entry, the newest event merged into it.")
    tokens: TokenCount
    heuristic: Flag = Field(default=False, description="Counted as UTF-8 bytes / 4: no tokenizer was available.")
    merged: Flag = Field(default=False, description="The oldest entries, merged to keep the state bounded.")


class CompactionRecord(Record):
    """One compaction: how it was triggered, what it replaced and what the projection did (seed 000 5.4/5.5)."""

    trigger_mode: TriggerMode
    started_at: Timestamp | None = None
    landed_at: Timestamp | None = Field(default=None, description="When the surface dropped (summary or completion).")
    completed_at: Timestamp | None = None
    tokens_before: TokenCount | None = Field(default=None, description="As the worker reported it.")
    tokens_after: TokenCount | None = Field(default=None, description="As the worker reported it.")
    summary_tokens: TokenCount | None = None
    summary_chars: Count | None = Field(default=None, description="Length of the summary text, when sent as text.")
    projected_before: TokenCount | None = Field(default=None, description="The projection just before it landed.")
    projected_after: TokenCount | None = Field(default=None, description="The projection just after it landed.")


class GrowthStats(Record):
    """Exponentially weighted growth of the context, the input of the forecast (issue 6 "Forecast")."""

    turns: Count = Field(default=0, description="Usage samples seen (a usage sample is a turn).")
    tokens_per_turn: Rate = 0.0
    tokens_per_turn_var: Rate = 0.0
    tokens_per_second: Rate = 0.0
    tokens_per_second_var: Rate = 0.0
    large_messages: Count = 0
    large_message_tokens: Rate = Field(default=0.0, description="Weighted mean size of large surface additions.")
    last_turn_at: Timestamp | None = None
    last_turn_tokens: TokenCount | None = None


class EstimateAccuracy(Record):
    """Running totals of how far the projection was from the provider sample that followed it (estimator error).

    Each usage sample checks the projection made just before it: the estimate of what that request would carry.
    Totals, not a list, so the state stays bounded; readers difference them over time (per thread and day).
    """

    checks: Count = 0
    abs_error_tokens: Version = Field(default=0, description="Sum of |projected - sampled| over the checks.")
    signed_error_tokens: SignedTotal = Field(default=0, description="Sum of projected - sampled (above 0: over).")
    sampled_tokens: Version = Field(default=0, description="Sum of the samples checked against.")

    def checked(self, projected: int, sampled: int) -> EstimateAccuracy:
        return EstimateAccuracy(
            checks=self.checks + 1,
            abs_error_tokens=self.abs_error_tokens + abs(projected - sampled),
            signed_error_tokens=self.signed_error_tokens + projected - sampled,
            sampled_tokens=self.sampled_tokens + sampled,
        )


class ReadingMark(Record):
    """The last emitted reading, against which the next one is judged (step and level boundary)."""

    pct: Percent
    level: ContextBudgetLevel


class ProjectionState(Record):
    """One thread's projection. `pressure_tokens`, `surface_tokens` and `projected_tokens` derive from it."""

    state_version: int = PROJECTION_STATE_VERSION
    thread_id: Id
    project_id: Id | None = None
    node_id: Id | None = Field(default=None, description="From the events, else the engine's thread state.")
    worker_id: Id | None = Field(default=None, description="From the events, else the engine's thread state.")
    handoff_ready: Flag = Field(
        default=False, description="The engine's thread state holds a package ready for its current cycle."
    )
    wrap_up_requested: Flag = Field(default=False, description="The engine asked for a wrap-up in its current cycle.")
    cycle_started_at: Timestamp | None = Field(
        default=None, description="The engine's current cycle began with this compaction (its last_compaction_at)."
    )
    previous_handoff_ready: Flag = Field(default=False, description="`handoff_ready` as last seen in the cycle before.")
    previous_wrap_up_requested: Flag = Field(
        default=False, description="`wrap_up_requested` as last seen in the cycle before."
    )
    handoff_ready_at_compaction: Flag = Field(
        default=False, description="A ready package existed when the open (or last) compaction started (spec 9.5)."
    )
    wrap_up_requested_at_compaction: Flag = Field(
        default=False, description="A wrap-up had been requested when the open (or last) compaction started."
    )
    sample: UsageAnchor | None = None
    sampled_surface_tokens: TokenCount = Field(default=0, description="Surface when the sample landed (seed 003).")
    surface: Annotated[list[SurfaceEntry], Field(max_length=MAX_SURFACE_ENTRIES)] = Field(default_factory=list)
    fixed_surface_tokens: TokenCount = Field(
        default=0, description="Manifest sections other than messages and handoff (system prompt, tools)."
    )
    manifest: ContextManifest | None = Field(default=None, description="The latest context manifest (seed 000 5.2).")
    memory_injection_enabled: Flag | None = None
    compaction_count: Count = 0
    last_compaction_at: Timestamp | None = None
    open_compaction: CompactionRecord | None = None
    compactions: Annotated[list[CompactionRecord], Field(max_length=MAX_COMPACTION_HISTORY)] = Field(
        default_factory=list, description="Finished compactions, newest last (bounded)."
    )
    truncated_tool_results: Count = 0
    estimate_accuracy: EstimateAccuracy = Field(default_factory=EstimateAccuracy)
    compact_requests: Count = 0
    last_compact_requested_at: Timestamp | None = None
    growth: GrowthStats = Field(default_factory=GrowthStats)
    last_reading: ReadingMark | None = None
    readings_emitted: Count = Field(default=0, description="Kept across versions: reading sequences never repeat.")
    recent_event_ids: Annotated[IdList, Field(max_length=MAX_RECENT_EVENT_IDS)] = Field(
        default_factory=list, description="Ids of the latest events applied, oldest first (replays change nothing)."
    )
    updated_at: Timestamp

    @property
    def pressure_tokens(self) -> int | None:
        """The provider's exact prompt size of the last request; None before the first usage sample."""
        return self.sample.input_tokens if self.sample is not None else None

    @property
    def surface_tokens(self) -> int:
        return self.fixed_surface_tokens + sum(entry.tokens for entry in self.surface)

    @property
    def projected_tokens(self) -> int:
        """Seed 003: the sample plus the re-priced surface change since it; the surface alone before any sample."""
        if self.sample is None:
            return self.surface_tokens
        return max(0, self.sample.input_tokens + self.surface_tokens - self.sampled_surface_tokens)

    @property
    def heuristic(self) -> bool:
        return any(entry.heuristic for entry in self.surface)


class BudgetReading(Record):
    """The budget as the projection sees it, emitted when it moved enough (the lead turns it into a snapshot)."""

    thread_id: Id
    project_id: Id | None = None
    cause_event_id: Id
    occurred_at: Timestamp = Field(description="The newest event time the state has seen (never before a compaction).")
    sequence: Count = Field(description="1, 2, ... per thread: a monotonic version for the estimator snapshot.")
    profile: Name
    context_budget_remaining_pct: Percent = Field(description="Room left before the profile's compaction point.")
    context_budget_level: ContextBudgetLevel
    tool_shown_pct: Percent = Field(description="The percent the thread's own tool shows for the same tokens.")
    projected_tokens: TokenCount
    sampled_tokens: TokenCount | None = Field(default=None, description="The raw provider sample, when there is one.")
    surface_tokens: TokenCount
    window_tokens: TokenCount
    compaction_point_tokens: TokenCount
    compaction_point_key: Name | None = Field(
        default=None, description="The thread's key of the fleet's compaction points (`core.fleet_points`)."
    )
    estimated_remaining_turns: Count | None = None
    estimated_remaining_large_messages: Count | None = None
    compaction_expected_at: Timestamp | None = None
    compaction_expected_low_at: Timestamp | None = Field(default=None, description="Earliest plausible compaction.")
    compaction_expected_high_at: Timestamp | None = Field(default=None, description="Latest plausible compaction.")
    last_compaction_at: Timestamp | None = None
    compaction_count: Count = 0
    compacted: Flag = Field(default=False, description="Emitted because a compaction just landed.")
    heuristic: Flag = Field(default=False, description="Part of the surface was estimated as UTF-8 bytes / 4.")


class ThreadProjection(Record):
    """A record of `thread-projections` [thread_id] (compacted): what readers show beside the engine's state.

    Published with every budget reading: the projected tokens (readers prefer them) and the raw sample they fall back
    to, the window, the forecast band, the latest context manifest (seed 000 5.2) and the last compaction's trigger.
    """

    thread_id: Id
    project_id: Id | None = None
    projected_tokens: TokenCount
    sampled_tokens: TokenCount | None = None
    sampled_at: Timestamp | None = None
    surface_tokens: TokenCount
    context_window_tokens: TokenCount
    heuristic: Flag = False
    estimated_remaining_turns: Count | None = None
    estimated_remaining_large_messages: Count | None = None
    compaction_expected_at: Timestamp | None = None
    compaction_expected_earliest_at: Timestamp | None = None
    compaction_expected_latest_at: Timestamp | None = None
    last_compaction_trigger_mode: TriggerMode | None = None
    truncated_tool_results: Count = 0
    estimate_accuracy: EstimateAccuracy = Field(default_factory=EstimateAccuracy)
    latest_manifest: ContextManifest | None = None
    updated_at: Timestamp
    compaction_point_key: Name | None = Field(
        default=None,
        description="Additive: the thread's key of the fleet's compaction points, `tool|version family|model|window` "
        "(`GET /api/v1/compaction-points` shows the point learnt for it, with its evidence).",
    )
    compaction_point_tokens: TokenCount | None = Field(
        default=None, description="Additive: the point the budget was measured against (the fleet's, else a formula)."
    )


def restore_state(stored: bytes | str) -> ProjectionState | None:
    """A stored state of any fold version; None only when not even its core can be read (see the module doc)."""
    try:
        raw = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    if raw.get("state_version") == PROJECTION_STATE_VERSION:
        try:
            return ProjectionState.model_validate_json(stored)
        except ValidationError:
            pass
    core = {name: raw[name] for name in CORE_FIELDS if name in raw}
    try:
        return ProjectionState.model_validate_json(json.dumps(core))
    except ValidationError:
        return None
