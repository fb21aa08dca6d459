"""The projection fold: projected tokens react to surface changes and compactions at once; replays change nothing."""

from __future__ import annotations

from functools import reduce

from hypothesis import given, settings
from hypothesis import strategies as st

from core.profiles import ProfileSet
from schemas import ContextBudgetLevel, ThresholdPolicy, TriggerMode
from schemas.projection import ProjectionState
from schemas.session_events import MemoryInjectionChanged, SessionEvent
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.projection.fold import UNCHANGED, ProjectionStep, fold
from tests.unit.projection.builders import (
    at,
    compact_requested,
    completed,
    manifest,
    message,
    started,
    summary,
    tool_result,
    usage,
)

ESTIMATOR = TokenEstimator()
PROFILES = ProfileSet()
CONFIG = ProjectionConfig()


def step(state: ProjectionState | None, event: SessionEvent, config: ProjectionConfig = CONFIG) -> ProjectionStep:
    return fold(state, event, ESTIMATOR, PROFILES, config)


def run(events: list[SessionEvent], config: ProjectionConfig = CONFIG) -> ProjectionState | None:
    def apply(state: ProjectionState | None, event: SessionEvent) -> ProjectionState | None:
        return step(state, event, config).state or state

    return reduce(apply, events, None)


# -- random sessions ------------------------------------------------------------------------------------------------
@st.composite
def sessions(draw: st.DrawFn) -> list[SessionEvent]:
    """Arbitrary sessions: samples, messages, tool results, manifests and compactions in any order."""
    events: list[SessionEvent] = []
    surface_ids: list[str] = []
    for i in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["usage", "message", "tool", "manifest", "started", "summary", "completed"]))
        tokens = draw(st.integers(0, 60_000))
        if kind == "usage":
            events.append(usage(tokens, i, window=draw(st.sampled_from([None, 100_000, 272_000]))))
        elif kind in ("message", "tool"):
            event = message(tokens, i) if kind == "message" else tool_result(tokens, i, truncated=draw(st.booleans()))
            surface_ids.append(event.event_id)
            events.append(event)
        elif kind == "manifest":
            events.append(manifest({"system": tokens, "messages": 5}, window=draw(st.sampled_from([None, 200_000]))))
        elif kind == "started":
            events.append(started(i))
        elif kind == "summary":
            through = draw(st.sampled_from([None, *surface_ids])) if surface_ids else None
            events.append(summary(tokens // 10, i, through=through))
        else:
            events.append(completed(i, after=draw(st.none() | st.integers(0, 60_000))))
    return events


@settings(max_examples=200, deadline=None)
@given(events=sessions())
def test_projection_is_never_negative_and_readings_are_in_range(events: list[SessionEvent]) -> None:
    state = None
    for event in events:
        result = step(state, event)
        state = result.state or state
        assert state is not None
        assert state.projected_tokens >= 0
        assert state.surface_tokens >= 0
        if result.reading is not None:
            assert 0 <= result.reading.context_budget_remaining_pct <= 100
            assert result.reading.projected_tokens == state.projected_tokens


@settings(max_examples=200, deadline=None)
@given(events=sessions())
def test_replaying_the_same_events_gives_the_same_state(events: list[SessionEvent]) -> None:
    assert run(events) == run(events)


@settings(max_examples=200, deadline=None)
@given(events=sessions(), data=st.data())
def test_duplicates_change_nothing(events: list[SessionEvent], data: st.DataObject) -> None:
    with_repeats = []
    for event in events:
        with_repeats.append(event)
        if data.draw(st.booleans()):
            with_repeats.append(data.draw(st.sampled_from(with_repeats)))  # a repeat of this or an earlier event
    assert run(with_repeats) == run(events)
    final = run(events)
    assert all(step(final, event) is UNCHANGED for event in events[-CONFIG.dedupe_window :])


@settings(max_examples=100, deadline=None)
@given(before=st.integers(0, 200_000), texts=st.lists(st.text(max_size=400), min_size=1, max_size=5))
def test_surface_growth_after_a_sample_raises_projected_by_exactly_the_estimate(before: int, texts: list[str]) -> None:
    state = run([message(3_000), usage(before, 1)])
    assert state is not None
    assert state.projected_tokens == before
    for i, text in enumerate(texts):
        grown = step(state, message(text=text, seconds=2 + i)).state
        assert grown is not None
        assert grown.projected_tokens - state.projected_tokens == ESTIMATOR.count(text).tokens
        assert grown.pressure_tokens == before
        state = grown


@settings(max_examples=100, deadline=None)
@given(
    spans=st.lists(st.integers(1, 50_000), min_size=1, max_size=8),
    sample=st.integers(0, 300_000),
    fraction=st.floats(0, 0.99),
)
def test_a_compaction_lowers_projected_at_once_while_the_raw_sample_stays(
    spans: list[int], sample: int, fraction: float
) -> None:
    # A provider's sample carries at least the surface it was taken with (plus what the fold never saw).
    sample += sum(spans)
    state = run([*(message(n, i) for i, n in enumerate(spans)), usage(sample, 10), message(spans[0], 11)])
    assert state is not None
    summary_tokens = int(sum(spans) * fraction)  # smaller than everything it replaces
    result = step(state, summary(summary_tokens, 12))
    assert result.state is not None
    assert result.state.pressure_tokens == sample
    assert result.state.projected_tokens < state.projected_tokens or state.projected_tokens == 0
    assert result.reading is not None
    assert result.reading.compacted
    assert result.reading.sampled_tokens == sample


# -- seed 003 -------------------------------------------------------------------------------------------------------
def test_seed_003_compaction_drops_projected_from_4383_to_304_while_the_sample_stays_at_4227() -> None:
    """Seed 003: system 18 + messages 4365 before, messages 286 after; the provider sample (~4227) does not move."""
    history = [message(1_500, 1), message(1_209, 2), tool_result(1_500, 3)]  # 4,209 message tokens
    state = run([manifest({"system": 18, "tools": 0, "messages": 4_209}, window=100_000), *history])
    state = run_from(state, [usage(4_227, 4), message(156, 5)])  # the answer joins after its own sample
    assert (state.pressure_tokens, state.surface_tokens, state.projected_tokens) == (4_227, 4_383, 4_383)

    result = step(state, summary(286, 6))
    after = result.state
    assert after is not None
    assert (after.pressure_tokens, after.surface_tokens, after.projected_tokens) == (4_227, 304, 304)
    reading = result.reading
    assert reading is not None
    assert reading.compacted
    assert (reading.sampled_tokens, reading.projected_tokens, reading.window_tokens) == (4_227, 304, 100_000)
    assert reading.compaction_count == 1
    assert reading.last_compaction_at == after.last_compaction_at


def run_from(state: ProjectionState | None, events: list[SessionEvent]) -> ProjectionState:
    for event in events:
        state = step(state, event).state or state
    assert state is not None
    return state


# -- compactions ----------------------------------------------------------------------------------------------------
def test_summary_replaces_the_span_through_its_event_and_keeps_what_came_after() -> None:
    first, second, third = message(1_000, 1), message(2_000, 2), message(400, 3)
    state = run_from(None, [first, second, third, summary(100, 4, through=second.event_id)])
    assert [e.tokens for e in state.surface] == [100, 400]


def test_summary_through_an_id_merged_away_replaces_the_merged_entry() -> None:
    config = ProjectionConfig(max_surface_entries=3)
    events = [message(100 * (i + 1), i, event_id=f"m{i}") for i in range(5)]
    state = run(events, config)
    assert state is not None
    assert state.surface[0].merged
    assert [e.tokens for e in state.surface] == [600, 400, 500]
    after = step(state, summary(10, 6, through="m0"), config).state
    assert after is not None
    assert [e.tokens for e in after.surface] == [10, 400, 500]


def test_compaction_lifecycle_is_counted_once_and_kept_in_history() -> None:
    state = run_from(None, [message(5_000, 1), usage(5_000, 2), started(3, TriggerMode.MID_LOOP, before=5_000)])
    state = run_from(state, [summary(300, 4, text="压缩摘要保留决策与测试结果", mode=TriggerMode.MID_LOOP)])
    done = step(state, completed(5, after=320, mode=TriggerMode.MID_LOOP))
    assert done.state is not None
    assert done.state.compaction_count == 1
    assert done.reading is None or not done.reading.compacted  # the drop was already announced by the summary
    record = done.state.compactions[-1]
    assert record.trigger_mode is TriggerMode.MID_LOOP
    assert (record.tokens_before, record.tokens_after) == (5_000, 320)
    assert record.summary_chars == len("压缩摘要保留决策与测试结果")
    assert (record.projected_before, record.projected_after) == (5_000, done.state.projected_tokens)
    assert done.state.open_compaction is None


def test_completion_without_a_summary_rebases_projected_to_tokens_after() -> None:
    state = run_from(None, [message(50_000, 1), usage(52_000, 2), message(3_000, 3)])
    result = step(state, completed(4, before=55_000, after=6_000))
    assert result.state is not None
    assert result.state.projected_tokens == 6_000
    assert result.state.pressure_tokens == 52_000
    assert result.reading is not None
    assert result.reading.compacted
    assert result.reading.compaction_count == 1


def test_compact_requested_is_recorded() -> None:
    request = compact_requested(1)
    result = step(run_from(None, [message(10, 0)]), request)
    assert result.state is not None
    assert result.state.compact_requests == 1
    assert result.state.last_compact_requested_at == request.occurred_at


# -- surface details ------------------------------------------------------------------------------------------------
def test_truncated_tool_results_are_counted() -> None:
    state = run_from(None, [tool_result(10, 1, truncated=True), tool_result(10, 2), tool_result(10, 3, truncated=True)])
    assert state.truncated_tool_results == 2


def test_manifest_is_kept_and_its_first_arrival_after_a_sample_does_not_read_as_growth() -> None:
    state = run_from(None, [message(1_000, 1), usage(3_000, 2), manifest({"system": 2_000, "messages": 1_000})])
    assert state.manifest is not None
    assert state.projected_tokens == 3_000
    grown = run_from(state, [manifest({"system": 2_500, "memory": 100, "messages": 1_000})])
    assert grown.projected_tokens == 3_600  # a larger system prompt and a memory section join the next request


def test_each_usage_sample_scores_the_projection_made_before_it() -> None:
    first = run_from(None, [usage(3_000, 1)])
    assert first.estimate_accuracy.checks == 0  # nothing was projected before the first sample
    # projected 3,000 + 500 = 3,500 before a request that carried 3,400 (100 over), then 3,400 + 200 against 3,700
    state = run_from(first, [message(500, 2), usage(3_400, 3), message(200, 4), usage(3_700, 5)])
    accuracy = state.estimate_accuracy
    assert (accuracy.checks, accuracy.abs_error_tokens, accuracy.signed_error_tokens) == (2, 100 + 100, 100 - 100)
    assert accuracy.sampled_tokens == 3_400 + 3_700
    assert step(state, usage(1_000, 4)) is UNCHANGED  # a late sample scores nothing


def test_a_thread_without_a_sample_scores_its_surface_estimate() -> None:
    state = run_from(None, [message(1_200, 1), usage(1_000, 2)])
    assert (state.estimate_accuracy.checks, state.estimate_accuracy.signed_error_tokens) == (1, 200)


def test_a_late_usage_sample_never_replaces_a_newer_one() -> None:
    state = run_from(None, [usage(9_000, 10)])
    assert step(state, usage(1_000, 5)) is UNCHANGED


def test_current_openai_models_without_o200k_on_disk_mark_readings_heuristic() -> None:
    result = step(run_from(None, [usage(1_000, 0, model="gpt-5-codex")]), message(text="hello " * 50, seconds=1))
    assert result.state is not None
    assert result.state.heuristic
    first = step(None, usage(1_000, 0, model="gpt-5-codex"))
    assert first.reading is not None
    assert not first.reading.heuristic
    assert first.reading.profile == "codex"


# -- readings -------------------------------------------------------------------------------------------------------
def test_readings_come_on_the_configured_step_or_a_level_boundary() -> None:
    config = ProjectionConfig(reading_step_pct=5)
    generic_window = 100_000  # generic: compaction at 80,000, 800 tokens a point
    first = step(None, usage(10_000, 0, window=generic_window), config)  # 87.5%
    assert first.reading is not None
    assert first.reading.sequence == 1
    small = step(first.state, message(3_000, 1), config)  # 3.75 points
    assert small.reading is None
    big = step(small.state, message(1_000, 2), config)  # 5 points since the last reading
    assert big.reading is not None
    assert big.reading.sequence == 2
    assert big.reading.context_budget_remaining_pct == 82.5  # (80,000 - 14,000) / 80,000
    strict = ThresholdPolicy(project_id="*", safe_min_pct=82, watch_min_pct=50, urgent_min_pct=25)
    crossed = fold(big.state, message(1_000, 3), ESTIMATOR, PROFILES, config, strict)  # 1.25 points: 81.25
    assert crossed.reading is not None
    assert crossed.reading.context_budget_level is ContextBudgetLevel.WATCH


def test_no_reading_before_anything_was_measured() -> None:
    event = MemoryInjectionChanged(thread_id="thread-a", event_id="mem-1", occurred_at=at(0), enabled=False)
    result = step(None, event)
    assert result.reading is None
    assert result.state is not None
    assert result.state.memory_injection_enabled is False


def test_reading_carries_the_forecast_once_the_thread_has_grown() -> None:
    events = [usage(10_000 + 2_000 * i, 10 * i, window=100_000) for i in range(6)]
    state = run_from(None, events)
    reading = step(state, message(1_000, 60), ProjectionConfig(reading_step_pct=0.5)).reading
    assert reading is not None
    # generic: compaction at 80,000; projected 21,000 -> 59,000 left at 2,000 a turn and 200 a second
    assert reading.estimated_remaining_turns == 29
    assert reading.compaction_expected_at is not None
    assert (reading.compaction_expected_at - reading.occurred_at).total_seconds() == 295


def test_history_the_fold_never_saw_is_compacted_away_with_the_span() -> None:
    """A thread watched mid-way: its sample carries 230k tokens the surface never listed; a summary replacing every
    message leaves the summary (and later additions), not the unseen history."""
    state = run([usage(230_000, 0), message(1_000, 1)])
    assert state is not None
    assert state.projected_tokens == 231_000
    compacted = step(state, summary(3_000, 2)).state
    assert compacted is not None
    assert compacted.projected_tokens == 3_000
    assert compacted.pressure_tokens == 230_000
    grown = step(compacted, message(500, 3)).state
    assert grown is not None
    assert grown.projected_tokens == 3_500
