"""Codex's token usage as the reporter sees it: which tokens occupy the window, and the two percents of them.

- `percent_remaining`: the percent Codex itself displays, so a user sees the same number there and here: the
  projection's Codex profile (`core.profiles.CodexProfile.shown_pct`, Codex's
  `percent_of_context_window_remaining`) with the rounding of the Codex version in use.
- `budget_pct`: what a snapshot reports as `context_budget_remaining_pct`: room left before Codex's auto-compaction
  over the usable span (the same profile's `remaining_pct`), the spec's "safe room before compaction".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from core.profiles import CODEX_BASELINE_TOKENS
from core.profiles import CodexProfile as ProjectionCodexProfile

BASELINE_TOKENS = CODEX_BASELINE_TOKENS
"""Codex's fixed system prompt + tool overhead, taken out of both the used tokens and the window."""
CODEX = ProjectionCodexProfile()


@dataclass(frozen=True)
class TokenUsage:
    """One breakdown of Codex token usage (a request's `last`, or the session's cumulative `total`)."""

    total_tokens: int
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    cache_write_input_tokens: int = 0
    """Newer versions' prompt tokens written to the cache (`cache_write_input_tokens`, app-server
    `cacheWriteInputTokens`): part of the input, so the occupancy is unchanged; kept with the breakdown."""
    includes_reasoning: bool | None = None
    """What the rollout's `last_usage_includes_reasoning` says (Codex 0.169.0 writes it beside the last usage):
    whether Codex counts this usage's reasoning tokens in its context. None where the source does not say."""


@dataclass(frozen=True)
class CodexProfile:
    """How one Codex version turns usage into its displayed percent; versions differ in two details."""

    subtract_reasoning: bool
    """Reasoning output of earlier turns is dropped from the context, so older versions left it out of the count."""
    rounds: bool
    """Newer versions round to the nearest percent (halves away from zero); older ones truncate."""

    def tokens_in_context_window(self, last: TokenUsage) -> int:
        """Occupancy from the LAST request's usage: the cumulative total exceeds the window after compactions. Where
        the usage says whether Codex counts its reasoning, that decides; else this profile does."""
        subtract = self.subtract_reasoning if last.includes_reasoning is None else not last.includes_reasoning
        if subtract:
            return max(last.total_tokens - last.reasoning_output_tokens, 0)
        return last.total_tokens

    def percent_remaining(self, last: TokenUsage, window: int) -> int:
        """Percent of the window left, 0..100, exactly as Codex displays it; 0 when the window is not above baseline."""
        fraction = CODEX.shown_pct(self.tokens_in_context_window(last), window)
        # Rust's f64::round rounds halves away from zero; Python's round() would round them to even.
        return math.floor(fraction + 0.5) if self.rounds else math.floor(fraction)

    def budget_pct(self, last: TokenUsage, window: int) -> float:
        """Room left before auto-compaction over the usable span, 0..100 (the snapshot's budget)."""
        return CODEX.remaining_pct(self.tokens_in_context_window(last), window)


CODEX_PROFILES: Mapping[str, CodexProfile] = MappingProxyType(
    {
        # The last request's `total - reasoning_output`, rounded (Codex from Oct 2025).
        "reference": CodexProfile(subtract_reasoning=True, rounds=True),
        # Codex before Oct 2025: the same count, truncated.
        "truncating": CodexProfile(subtract_reasoning=True, rounds=False),
        # Codex from Nov 2025 (openai/codex #6161) to 0.169.0 (REFERENCES.md: current versions count the last
        # `total_tokens`): reasoning tokens count too, since they may stay in context mid-turn.
        "with-reasoning": CodexProfile(subtract_reasoning=False, rounds=True),
    }
)
DEFAULT_CODEX_PROFILE = CODEX_PROFILES["with-reasoning"]
"""The versions in use; a rollout's `last_usage_includes_reasoning` overrides any profile's count."""
