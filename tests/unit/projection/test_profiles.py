"""Profile math at exact numbers: compaction points, remaining budget, and each tool's own shown percent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.profiles import ClaudeCodeProfile, CodexProfile, GenericProfile, ProfileSet, window_tokens


def codex_percent_left(used: int, window: int) -> float:
    """REFERENCES.md, Codex `TokenUsage`: (window - 12000 - max(used - 12000, 0)) / (window - 12000), clamped 0..100."""
    baseline = 12_000
    if window <= baseline:
        return 0.0
    effective = window - baseline
    return max(0.0, min(100.0, (effective - max(used - baseline, 0)) / effective * 100))


@pytest.mark.parametrize(
    ("used", "window", "shown"),
    [(112_000, 212_000, 50.0), (5_000, 212_000, 100.0), (12_000, 212_000, 100.0), (212_000, 212_000, 0.0),
     (300_000, 212_000, 0.0), (1_000, 12_000, 0.0)],
)  # fmt: skip
def test_codex_shown_percent_at_exact_numbers(used: int, window: int, shown: float) -> None:
    assert CodexProfile().shown_pct(used, window) == shown


@given(used=st.integers(0, 2_000_000), window=st.integers(0, 2_000_000))
def test_codex_shown_percent_is_codexs_own_formula(used: int, window: int) -> None:
    assert CodexProfile().shown_pct(used, window) == codex_percent_left(used, window)


def test_codex_compacts_at_90_percent_of_the_model_window_and_budgets_from_its_baseline() -> None:
    codex = CodexProfile()
    # REFERENCES.md, Codex 0.169.0: gpt-5.5's 272,000 window is reported as 258,400 usable (95%); it compacts once the
    # last total_tokens reach 0.9 x 272,000 = 244,800, not 0.9 x 258,400 = 232,560.
    assert codex.compaction_point(258_400) == 244_800
    assert codex.compaction_point(190_000) == 180_000  # a 200,000 model
    assert codex.remaining_pct(96_000, 190_000) == 50.0  # (180,000 - 96,000) / (180,000 - 12,000)
    assert codex.remaining_pct(12_000, 190_000) == codex.remaining_pct(0, 190_000) == 100.0
    assert codex.remaining_pct(180_000, 190_000) == 0.0
    assert codex.default_window_tokens == 258_400  # 272,000 x 95%
    assert codex.compaction_band(190_000) == (170_500, 189_500)


def test_claude_code_compacts_where_2_1_328_did_and_shows_room_in_the_window() -> None:
    claude = ClaudeCodeProfile()
    assert claude.effective_window(200_000) == 190_000
    assert claude.compaction_point(200_000) == 177_000  # REFERENCES.md: 2.1.328 at about 177,000, output included
    assert ClaudeCodeProfile(max_output_tokens=8_000).compaction_point(200_000) == 179_000
    assert claude.remaining_pct(88_500, 200_000) == 50.0
    assert claude.shown_pct(88_500, 200_000) == 55.75  # room in the window, as its status line shows
    assert claude.shown_pct(200_000, 200_000) == 0.0
    assert claude.window("claude-sonnet-4-5[1m]") == 1_000_000


def test_generic_compacts_at_its_fraction_and_shows_the_raw_window() -> None:
    generic = GenericProfile()
    assert generic.compaction_point(100_000) == 80_000
    assert generic.remaining_pct(40_000, 100_000) == 50.0
    assert generic.shown_pct(40_000, 100_000) == 60.0
    assert GenericProfile(compaction_fraction=0.5).remaining_pct(25_000, 100_000) == 50.0


@given(a=st.integers(0, 500_000), b=st.integers(0, 500_000), window=st.integers(1, 500_000))
def test_more_tokens_never_leave_more_budget(a: int, b: int, window: int) -> None:
    low, high = sorted((a, b))
    for profile in (CodexProfile(), ClaudeCodeProfile(), GenericProfile()):
        assert 0 <= profile.remaining_pct(high, window) <= profile.remaining_pct(low, window) <= 100


def test_profile_is_chosen_by_model_prefix_with_a_default() -> None:
    profiles = ProfileSet()
    assert profiles.for_model("gpt-5-codex").name == "codex"
    assert profiles.for_model("Claude-Opus-4").name == "claude-code"
    assert profiles.for_model("llama-3").name == "generic"
    assert profiles.for_model(None).name == "generic"
    with pytest.raises(ValueError, match="unknown profiles"):
        ProfileSet(default="missing")


def test_window_comes_from_the_manifest_then_the_sample_then_the_profile() -> None:
    codex = CodexProfile()
    assert window_tokens(codex, 100_000, 200_000) == 100_000
    assert window_tokens(codex, None, 200_000) == 200_000
    assert window_tokens(codex, None, None) == 258_400
