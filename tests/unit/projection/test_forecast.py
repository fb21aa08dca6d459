"""The forecast: weighted growth per turn and per second, large-message sizes, and a band around the time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from schemas.projection import GrowthStats
from streams.projection.forecast import ForecastConfig, forecast, observe_addition, observe_turn
from tests.unit.projection.builders import at

CONFIG = ForecastConfig()


def grown(samples: list[tuple[float, int]]) -> GrowthStats:
    growth = GrowthStats()
    for seconds, tokens in samples:
        growth = observe_turn(growth, tokens, at(seconds), CONFIG)
    return growth


def test_steady_growth_forecasts_turns_and_time_exactly() -> None:
    growth = grown([(10 * i, 10_000 + 2_000 * i) for i in range(5)])
    assert (growth.tokens_per_turn, growth.tokens_per_second, growth.tokens_per_turn_var) == (2_000, 200, 0)
    outlook = forecast(growth, 20_000, (70_000, 80_000, 90_000), at(40), CONFIG)
    assert outlook.estimated_remaining_turns == 30
    assert outlook.compaction_expected_at == at(40 + 300)
    # no spread in the rate: the band is the profile's spread of the compaction point alone
    assert outlook.compaction_expected_low_at == at(40 + 250)
    assert outlook.compaction_expected_high_at == at(40 + 350)


def test_a_fall_between_samples_is_a_compaction_not_growth() -> None:
    before = grown([(0, 10_000), (10, 12_000)])
    after = observe_turn(before, 3_000, at(20), CONFIG)
    assert (after.tokens_per_turn, after.tokens_per_second) == (before.tokens_per_turn, before.tokens_per_second)
    assert after.turns == 3
    assert after.last_turn_tokens == 3_000


def test_only_large_additions_shape_the_large_message_size() -> None:
    growth = observe_addition(GrowthStats(), 500, CONFIG)
    assert growth.large_messages == 0
    growth = observe_addition(observe_addition(growth, 10_000, CONFIG), 20_000, CONFIG)
    assert growth.large_messages == 2
    assert growth.large_message_tokens == 10_000 + CONFIG.alpha * 10_000
    outlook = forecast(growth, 0, (0, 52_000, 52_000), at(0), CONFIG)
    assert outlook.estimated_remaining_large_messages == 4


def test_no_growth_yet_forecasts_nothing() -> None:
    outlook = forecast(grown([(0, 5_000)]), 5_000, (80_000, 80_000, 80_000), at(0), CONFIG)
    assert outlook.estimated_remaining_turns is None
    assert outlook.compaction_expected_at is None
    assert outlook.estimated_remaining_large_messages is None


@given(
    samples=st.lists(st.integers(0, 200_000), min_size=2, max_size=30),
    used=st.integers(0, 300_000),
    point=st.integers(0, 300_000),
    spread=st.integers(0, 50_000),
)
def test_the_band_always_brackets_the_expected_time(samples: list[int], used: int, point: int, spread: int) -> None:
    growth = grown([(15 * i, tokens) for i, tokens in enumerate(samples)])
    outlook = forecast(growth, used, (max(0, point - spread), point, point + spread), at(0), CONFIG)
    if outlook.compaction_expected_at is not None:
        assert outlook.compaction_expected_low_at is not None
        assert outlook.compaction_expected_low_at <= outlook.compaction_expected_at
        high = outlook.compaction_expected_high_at
        assert high is None or outlook.compaction_expected_at <= high
