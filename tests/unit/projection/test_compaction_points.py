"""The learned compaction point: threshold compactions only, per (tool, model, window), robust and bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.compaction_points import (
    KEYS_KEPT,
    SAMPLES_KEPT,
    LearnedPoints,
    PointKey,
    compaction_band,
    is_threshold_compaction,
    robust_point,
)

SONNET = PointKey("claude-code", "claude-sonnet-4-5", 200_000)
DEFAULT = 177_000


def _learn(values: list[int], key: PointKey = SONNET, after_error: bool = False) -> LearnedPoints:
    learned = LearnedPoints()
    for value in values:
        learned = learned.observe(key, value, DEFAULT, after_error)
    return learned


def test_nothing_learned_is_the_default() -> None:
    assert LearnedPoints().point(SONNET, DEFAULT) == DEFAULT


def test_a_reactive_compaction_far_below_the_point_teaches_nothing() -> None:
    assert not is_threshold_compaction(27_030, DEFAULT, 200_000, after_api_error=False)
    assert _learn([27_030]).point(SONNET, DEFAULT) == DEFAULT
    assert _learn([27_030]).samples == {}


def test_a_compaction_after_an_api_error_teaches_nothing_even_at_a_plausible_size() -> None:
    assert _learn([176_000], after_error=True).point(SONNET, DEFAULT) == DEFAULT


def test_the_point_is_per_tool_model_and_window() -> None:
    learned = _learn([180_270])
    assert learned.point(SONNET, DEFAULT) == 180_270
    assert learned.point(PointKey("claude-code", "claude-opus-4-5", 200_000), DEFAULT) == DEFAULT
    assert learned.point(PointKey("claude-code", "claude-sonnet-4-5", 1_000_000), 977_000) == 977_000
    assert learned.point(PointKey("codex", "claude-sonnet-4-5", 200_000), DEFAULT) == DEFAULT


def test_an_outlier_does_not_move_the_median() -> None:
    learned = _learn([177_100, 177_300, 176_900, 177_200, 140_000])
    assert learned.point(SONNET, DEFAULT) == 177_150  # 140,000 is in the band but 37k from the others


def test_the_point_follows_a_vendor_move_within_the_kept_samples() -> None:
    learned = _learn([167_000] * SAMPLES_KEPT + [177_000] * (SAMPLES_KEPT // 2 + 1))
    assert learned.point(SONNET, DEFAULT) == 177_000
    assert len(learned.samples[SONNET]) == SAMPLES_KEPT


def test_keys_are_bounded_least_recently_observed_first() -> None:
    learned = LearnedPoints()
    for window in range(KEYS_KEPT + 1):
        key = PointKey("claude-code", "m", 200_000 + window)
        learned = learned.observe(key, DEFAULT, DEFAULT)
    assert len(learned.samples) == KEYS_KEPT
    assert PointKey("claude-code", "m", 200_000) not in learned.samples


def test_codex_band_holds_its_model_window_point() -> None:
    low, high = compaction_band(244_800, 258_400)
    assert low <= 232_560 < 244_800 <= high == 258_400


@given(st.lists(st.integers(0, 2_000_000), max_size=40), st.booleans())
def test_the_learned_point_always_lies_in_the_band(values: list[int], after_error: bool) -> None:
    low, high = compaction_band(DEFAULT, SONNET.window)
    assert low <= _learn(values, after_error=after_error).point(SONNET, DEFAULT) <= high


@given(st.lists(st.integers(1, 1_000_000), min_size=1, max_size=40))
def test_the_robust_point_lies_within_the_samples(values: list[int]) -> None:
    point = robust_point(values)
    assert point is not None
    assert min(values) <= point <= max(values)
