from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.profiles import CODEX_BASELINE_TOKENS, CODEX_VERSIONS, DEFAULT_CODEX_VERSION, TokenUsage

REFERENCE = CODEX_VERSIONS["reference"]
TRUNCATING = CODEX_VERSIONS["truncating"]
WITH_REASONING = CODEX_VERSIONS["with-reasoning"]
WINDOW = 258_400  # 272,000 x 95 %: the usable window Codex reports for gpt-5-codex


@pytest.mark.parametrize(
    ("window", "total", "reasoning", "expected"),
    [
        (WINDOW, 12_000, 0, 100),  # the baseline alone: Codex shows 100 % left
        (WINDOW, 5_000, 0, 100),  # below the baseline: used clamps at 0
        (WINDOW, 60_000, 2_000, 81),  # (246400 - 46000) / 246400 = 81.33
        (WINDOW, 150_000, 4_000, 46),  # 112400 / 246400 = 45.62 rounds up
        (WINDOW, 232_000, 3_000, 12),  # 29400 / 246400 = 11.93
        (WINDOW, WINDOW, 0, 0),  # full
        (WINDOW, 400_000, 0, 0),  # beyond the window: clamps at 0
        (212_000, 211_000, 0, 1),  # exactly 0.5 % left: Rust rounds the half away from zero
        (212_000, 213_000, 2_000, 1),  # the same after taking reasoning out
        (12_000, 1_000, 0, 0),  # a window not above the baseline shows 0
        (8_000, 0, 0, 0),
    ],
)
def test_reference_profile_matches_codex_at_exact_numbers(
    window: int, total: int, reasoning: int, expected: int
) -> None:
    assert REFERENCE.displayed_pct(TokenUsage(total, reasoning_output_tokens=reasoning), window) == expected


def test_default_profile_counts_the_last_total_as_current_versions_do() -> None:
    assert DEFAULT_CODEX_VERSION == WITH_REASONING


def test_codex_0_169_counts_reasoning_where_the_usage_says_so() -> None:
    """Issue 35: Codex 0.169.0's /status showed 68% left where the reporter said 81%; its rollouts now say whether its
    count includes reasoning (`last_usage_includes_reasoning`), and that flag decides over any profile."""
    counted = TokenUsage(90_848, reasoning_output_tokens=32_000, includes_reasoning=True)
    left_out = TokenUsage(90_848, reasoning_output_tokens=32_000, includes_reasoning=False)
    for profile in CODEX_VERSIONS.values():
        assert profile.tokens_in_context_window(counted) == 90_848
        assert profile.tokens_in_context_window(left_out) == 58_848
    assert REFERENCE.displayed_pct(counted, WINDOW) == 68  # (246,400 - 78,848) / 246,400
    assert WITH_REASONING.displayed_pct(left_out, WINDOW) == 81
    assert REFERENCE.displayed_pct(TokenUsage(90_848, reasoning_output_tokens=32_000), WINDOW) == 81  # unsaid


def test_truncating_profile_drops_the_fraction_where_reference_rounds_up() -> None:
    usage = TokenUsage(150_000, reasoning_output_tokens=4_000)  # 45.62 % left
    assert (REFERENCE.displayed_pct(usage, WINDOW), TRUNCATING.displayed_pct(usage, WINDOW)) == (46, 45)


def test_with_reasoning_profile_counts_reasoning_tokens_as_occupancy() -> None:
    usage = TokenUsage(150_000, reasoning_output_tokens=4_000)  # 138000 / 246400 used = 43.99 % left
    assert WITH_REASONING.displayed_pct(usage, WINDOW) == 44


@given(
    window=st.integers(0, 2_000_000),
    used=st.integers(0, 3_000_000),
    more=st.integers(0, 100_000),
)
def test_percent_stays_in_bounds_and_never_rises_with_more_tokens(window: int, used: int, more: int) -> None:
    for profile in CODEX_VERSIONS.values():
        fewer = profile.displayed_pct(TokenUsage(used), window)
        assert 0 <= fewer <= 100
        assert profile.displayed_pct(TokenUsage(used + more), window) <= fewer
        if window > CODEX_BASELINE_TOKENS and used <= CODEX_BASELINE_TOKENS:
            assert fewer == 100
