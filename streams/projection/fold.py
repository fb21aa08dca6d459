"""The projection fold: a thread's session events in, its projected context size and budget readings out (seed 003).

Two numbers are kept apart. `pressure_tokens` is the provider's latest usage sample: exact, but it only moves when a
request reports usage, and a compaction reports none. `surface_tokens` is the estimated size of what the next request
will carry: manifest sections other than messages (system prompt, tools), then every message, tool result and
compaction summary in arrival order. When a sample lands the surface is noted (`sampled_surface_tokens`), and

    projected_tokens = max(0, pressure_tokens + (surface_tokens - sampled_surface_tokens))

so only the change since the sample is estimated and the anchor stays exact. A compaction summary replaces the span it
summarises, the surface drops, and the projection falls at once while the sample does not move. Each sample also
scores the projection made before it (`estimate_accuracy`: the estimator error analysts read per thread and day).

Replays change nothing: the ids of the latest `dedupe_window` events applied are kept, and an older usage sample never
replaces a newer one. The fold is pure apart from the estimator's text cache, which only saves work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from core.fleet_points import PointLookup, learned_point, no_points, thread_key
from core.levels import classify_level
from core.profiles import ModelProfile, ProfileSet, window_tokens
from schemas import DEFAULT_POLICY, ThresholdPolicy, TriggerMode
from schemas.base import MAX_TOKENS
from schemas.projection import (
    BudgetReading,
    CompactionRecord,
    ProjectionState,
    ReadingMark,
    SurfaceEntry,
    UsageAnchor,
)
from schemas.session_events import (
    CompactionCompleted,
    CompactionStarted,
    CompactionSummary,
    CompactRequested,
    ContextManifest,
    MemoryInjectionChanged,
    MessageAdded,
    SessionEvent,
    ToolResultAdded,
    UsageSample,
)
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import Estimate
from streams.projection.forecast import forecast, observe_addition, observe_turn

MESSAGE_SECTION_KEYS = frozenset({"messages", "handoff"})
"""Manifest sections (seed 000 5.2) that message events and compaction summaries already carry into the surface."""


class Estimator(Protocol):
    def count(self, text: str, model: str | None = None) -> Estimate: ...


@dataclass(frozen=True)
class ProjectionStep:
    state: ProjectionState | None
    """The new state; None when the event changed nothing."""
    reading: BudgetReading | None = None
    """Emitted when the budget moved by the configured step, crossed a level boundary, or a compaction landed."""


UNCHANGED = ProjectionStep(None)


def fold(
    state: ProjectionState | None,
    event: SessionEvent,
    estimator: Estimator,
    profiles: ProfileSet,
    config: ProjectionConfig,
    policy: ThresholdPolicy = DEFAULT_POLICY,
    points: PointLookup = no_points,
) -> ProjectionStep:
    if state is not None and event.event_id in state.recent_event_ids:
        return UNCHANGED
    current = state or ProjectionState(thread_id=event.thread_id, updated_at=event.occurred_at)
    applied = _apply(current, event, estimator, config)
    if applied is None:
        return UNCHANGED
    changed, compacted = applied
    changed = changed.model_copy(
        update={
            "project_id": event.project_id or changed.project_id,
            "recent_event_ids": [*changed.recent_event_ids, event.event_id][-config.dedupe_window :],
            "updated_at": max(changed.updated_at, event.occurred_at),
        }
    )
    reading = budget_reading(changed, event, profiles, config, policy, compacted, points)
    if reading is not None:
        mark = ReadingMark(pct=reading.context_budget_remaining_pct, level=reading.context_budget_level)
        changed = changed.model_copy(update={"last_reading": mark, "readings_emitted": reading.sequence})
    return ProjectionStep(changed, reading)


def budget_reading(
    state: ProjectionState,
    cause: SessionEvent,
    profiles: ProfileSet,
    config: ProjectionConfig,
    policy: ThresholdPolicy = DEFAULT_POLICY,
    compacted: bool = False,
    points: PointLookup = no_points,
) -> BudgetReading | None:
    """The reading for the state, unless it is within the step of the last one at the same level. The budget is
    measured against the fleet's learned point of the thread's key where there is one, else the profile's."""
    if state.sample is None and not state.surface and state.manifest is None:
        return None  # nothing measured yet: an empty thread is not a full budget
    model = state.sample.model if state.sample else None
    profile = profiles.for_model(model)
    window = thread_window(state, profile)
    version = state.sample.tool_version if state.sample else None
    key = thread_key(profile.name, version, model, window)
    point = learned_point(points, key)
    point = profile.compaction_point(window) if point is None else point
    used = state.projected_tokens
    pct = profile.remaining_pct(used, window, point=point)
    level = classify_level(pct, policy)
    last = state.last_reading
    if not compacted and last is not None and level is last.level and abs(pct - last.pct) < config.reading_step_pct:
        return None
    early, late = profile.compaction_band(window, point)
    outlook = forecast(state.growth, used, (early, point, late), state.updated_at, config.forecast)
    return BudgetReading(
        thread_id=state.thread_id,
        project_id=state.project_id,
        cause_event_id=cause.event_id,
        occurred_at=state.updated_at,
        sequence=state.readings_emitted + 1,
        profile=profile.name,
        context_budget_remaining_pct=pct,
        context_budget_level=level,
        tool_shown_pct=profile.shown_pct(used, window),
        projected_tokens=min(used, MAX_TOKENS),
        sampled_tokens=state.pressure_tokens,
        surface_tokens=min(state.surface_tokens, MAX_TOKENS),
        window_tokens=window,
        compaction_point_tokens=point,
        compaction_point_key=key,
        estimated_remaining_turns=outlook.estimated_remaining_turns,
        estimated_remaining_large_messages=outlook.estimated_remaining_large_messages,
        compaction_expected_at=outlook.compaction_expected_at,
        compaction_expected_low_at=outlook.compaction_expected_low_at,
        compaction_expected_high_at=outlook.compaction_expected_high_at,
        last_compaction_at=state.last_compaction_at,
        compaction_count=state.compaction_count,
        compacted=compacted,
        heuristic=state.heuristic,
    )


def thread_window(state: ProjectionState, profile: ModelProfile) -> int:
    """The window the thread runs with: its latest manifest's, else its sample's, else the profile's."""
    return window_tokens(
        profile,
        state.manifest.estimated_window_tokens if state.manifest else None,
        state.sample.context_window_tokens if state.sample else None,
    )


# -- events ---------------------------------------------------------------------------------------------------------
def _apply(
    state: ProjectionState, event: SessionEvent, estimator: Estimator, config: ProjectionConfig
) -> tuple[ProjectionState, bool] | None:
    """The state after the event and whether a compaction landed with it; None when it changes nothing here."""
    model = state.sample.model if state.sample else None
    match event:
        case UsageSample():
            return _apply_usage(state, event, config)
        case MessageAdded() | ToolResultAdded():
            tokens, heuristic = _measure(event.text, event.token_count, estimator, model)
            truncated = isinstance(event, ToolResultAdded) and event.truncated
            entry = SurfaceEntry(event_id=event.event_id, tokens=tokens, heuristic=heuristic)
            update = {
                "surface": _bounded([*state.surface, entry], config.max_surface_entries),
                "growth": observe_addition(state.growth, tokens, config.forecast),
                "truncated_tool_results": state.truncated_tool_results + truncated,
            }
            return state.model_copy(update=update), False
        case ContextManifest():
            return _apply_manifest(state, event), False
        case CompactionStarted():
            record = CompactionRecord(
                trigger_mode=event.trigger_mode, started_at=event.occurred_at, tokens_before=event.tokens_before
            )
            history = _with_history(state.compactions, state.open_compaction, config)
            return state.model_copy(update={"open_compaction": record, "compactions": history}), False
        case CompactionSummary():
            tokens, heuristic = _measure(event.summary_text, event.summary_token_count, estimator, model)
            summary = SurfaceEntry(event_id=event.event_id, tokens=tokens, heuristic=heuristic)
            surface = _replace_span(state.surface, event.replaced_through_event_id, summary)
            record = _open_record(state, event.trigger_mode).model_copy(
                update={
                    "summary_tokens": tokens,
                    "summary_chars": len(event.summary_text) if event.summary_text is not None else None,
                }
            )
            return _land(state, state.model_copy(update={"surface": surface}), record, event.occurred_at)
        case CompactionCompleted():
            return _apply_completed(state, event, config)
        case CompactRequested():
            update = {"compact_requests": state.compact_requests + 1, "last_compact_requested_at": event.occurred_at}
            return state.model_copy(update=update), False
        case MemoryInjectionChanged():
            return state.model_copy(update={"memory_injection_enabled": event.enabled}), False
        case _:
            return None  # work facts are the engine's (streams/engine/fold.py apply_work_fact)


def _apply_usage(
    state: ProjectionState, event: UsageSample, config: ProjectionConfig
) -> tuple[ProjectionState, bool] | None:
    if state.sample is not None and event.occurred_at < state.sample.occurred_at:
        return None  # late: a newer sample is already the anchor
    sample = UsageAnchor(
        event_id=event.event_id,
        occurred_at=event.occurred_at,
        input_tokens=event.input_tokens,
        model=event.model or (state.sample.model if state.sample else None),
        context_window_tokens=event.context_window_tokens,
        tool_version=event.tool_version or (state.sample.tool_version if state.sample else None),
    )
    update: dict[str, object] = {
        "sample": sample,
        "sampled_surface_tokens": state.surface_tokens,
        "growth": observe_turn(state.growth, event.input_tokens, event.occurred_at, config.forecast),
    }
    if state.sample is not None or state.surface_tokens > 0:
        # The projection until now was the estimate of what this request carried: score it against the exact count.
        update["estimate_accuracy"] = state.estimate_accuracy.checked(state.projected_tokens, event.input_tokens)
    return state.model_copy(update=update), False


def _apply_manifest(state: ProjectionState, event: ContextManifest) -> ProjectionState:
    fixed = min(MAX_TOKENS, sum(s.tokens for s in event.sections if s.key not in MESSAGE_SECTION_KEYS))
    update: dict[str, object] = {"manifest": event, "fixed_surface_tokens": fixed}
    if state.manifest is None and state.sample is not None:
        # The first manifest describes sections the sample already carried: move the anchor with it, so learning
        # their size does not read as growth. Later manifests that change a section move the projection.
        update["sampled_surface_tokens"] = min(MAX_TOKENS, state.sampled_surface_tokens + fixed)
    return state.model_copy(update=update)


def _apply_completed(
    state: ProjectionState, event: CompactionCompleted, config: ProjectionConfig
) -> tuple[ProjectionState, bool]:
    opened = _open_record(state, event.trigger_mode)
    record = opened.model_copy(
        update={
            "completed_at": event.occurred_at,
            "tokens_before": event.tokens_before if event.tokens_before is not None else opened.tokens_before,
            "tokens_after": event.tokens_after,
        }
    )
    changed, compacted = state, False
    if record.landed_at is None:
        # No summary came: the worker's tokens_after is the only measure of what is left, so the surface is rebased
        # to make the projection equal it (the anchor keeps its sample).
        rebased = state if event.tokens_after is None else _rebased(state, event.tokens_after, event.event_id)
        changed, compacted = _land(state, rebased, record, event.occurred_at)
        record = changed.open_compaction or record
    history = _with_history(changed.compactions, record, config)
    return changed.model_copy(update={"open_compaction": None, "compactions": history}), compacted


# -- helpers --------------------------------------------------------------------------------------------------------
def _measure(text: str | None, token_count: int | None, estimator: Estimator, model: str | None) -> tuple[int, bool]:
    if token_count is not None:
        return token_count, False
    estimate = estimator.count(text or "", model)
    return min(estimate.tokens, MAX_TOKENS), estimate.heuristic


def _bounded(entries: list[SurfaceEntry], limit: int) -> list[SurfaceEntry]:
    """At most `limit` entries: the oldest merge into one, which a later compaction replaces as a whole."""
    if len(entries) <= limit:
        return entries
    cut = len(entries) - limit + 1
    oldest = entries[:cut]
    merged = SurfaceEntry(
        event_id=oldest[-1].event_id,
        tokens=min(MAX_TOKENS, sum(e.tokens for e in oldest)),
        heuristic=any(e.heuristic for e in oldest),
        merged=True,
    )
    return [merged, *entries[cut:]]


def _replace_span(entries: list[SurfaceEntry], through: str | None, summary: SurfaceEntry) -> list[SurfaceEntry]:
    """Everything up to and including `through` becomes the summary; without it (or unknown), everything so far.

    An id merged into the oldest entry is no longer listed; the merged entry alone is then what it replaces.
    """
    if through is not None:
        ids = [e.event_id for e in entries]
        if through in ids:
            return [summary, *entries[ids.index(through) + 1 :]]
        if entries and entries[0].merged:
            return [summary, *entries[1:]]
    return [summary]


def _rebased(state: ProjectionState, tokens_after: int, event_id: str) -> ProjectionState:
    """The surface after a compaction the worker measured: the fixed sections plus one entry for the rest."""
    remainder = max(0, tokens_after - state.fixed_surface_tokens)
    return state.model_copy(update={"surface": [SurfaceEntry(event_id=event_id, tokens=min(MAX_TOKENS, remainder))]})


def _open_record(state: ProjectionState, trigger_mode: TriggerMode) -> CompactionRecord:
    return state.open_compaction or CompactionRecord(trigger_mode=trigger_mode)


def _land(
    before: ProjectionState, after: ProjectionState, record: CompactionRecord, at: datetime
) -> tuple[ProjectionState, bool]:
    """The compaction's effect on the surface is in `after`; count it once, when it first lands."""
    first = record.landed_at is None
    record = record.model_copy(
        update={
            "landed_at": record.landed_at or at,
            "projected_before": record.projected_before if not first else before.projected_tokens,
            "projected_after": after.projected_tokens,
        }
    )
    update: dict[str, object] = {"open_compaction": record}
    if after.sample is not None:
        # Whatever the sample carried beyond the surface the fold knows (history from before it watched, sections
        # without a manifest) is the oldest context: compacted away with the span. Re-anchor so the projection is
        # the surface itself until the next sample, instead of letting that unknown part survive the compaction.
        update["sampled_surface_tokens"] = after.sample.input_tokens
    if first:
        update |= {"compaction_count": before.compaction_count + 1, "last_compaction_at": at}
    return after.model_copy(update=update), first


def _with_history(
    history: list[CompactionRecord], record: CompactionRecord | None, config: ProjectionConfig
) -> list[CompactionRecord]:
    return history if record is None else [*history, record][-config.compaction_history :]
