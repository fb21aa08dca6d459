"""The Codex profile: from one request's token usage and the window to the percent left Codex itself displays.

The same usage and window must give the same percent the user sees in Codex, so the formula and its rounding follow
Codex's `TokenUsage::percent_of_context_window_remaining` (REFERENCES.md), not a formula of our own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

BASELINE_TOKENS = 12_000
"""Codex's fixed system prompt + tool overhead, taken out of both the used tokens and the window."""


@dataclass(frozen=True)
class TokenUsage:
    """One breakdown of Codex token usage (a request's `last`, or the session's cumulative `total`)."""

    total_tokens: int
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0


@dataclass(frozen=True)
class CodexProfile:
    """How one Codex version turns usage into its displayed percent; versions differ in two details."""

    subtract_reasoning: bool
    """Reasoning output of earlier turns is dropped from the context, so older versions left it out of the count."""
    rounds: bool
    """Newer versions round to the nearest percent (halves away from zero); older ones truncate."""

    def tokens_in_context_window(self, last: TokenUsage) -> int:
        """Occupancy from the LAST request's usage: the cumulative total exceeds the window after compactions."""
        if self.subtract_reasoning:
            return max(last.total_tokens - last.reasoning_output_tokens, 0)
        return last.total_tokens

    def percent_remaining(self, last: TokenUsage, window: int) -> int:
        """Percent of the window left, 0..100, exactly as Codex displays it; 0 when the window is not above baseline."""
        if window <= BASELINE_TOKENS:
            return 0
        effective = window - BASELINE_TOKENS
        used = max(self.tokens_in_context_window(last) - BASELINE_TOKENS, 0)
        fraction = max(effective - used, 0) / effective * 100
        # Rust's f64::round rounds halves away from zero; Python's round() would round them to even.
        shown = math.floor(fraction + 0.5) if self.rounds else math.floor(fraction)
        return min(max(shown, 0), 100)


CODEX_PROFILES: Mapping[str, CodexProfile] = MappingProxyType(
    {
        # REFERENCES.md: the last request's `total - reasoning_output`, rounded (Codex from Oct 2025).
        "reference": CodexProfile(subtract_reasoning=True, rounds=True),
        # Codex before Oct 2025: the same count, truncated.
        "truncating": CodexProfile(subtract_reasoning=True, rounds=False),
        # Codex from Nov 2025 (openai/codex #6161): reasoning tokens count too, since they may stay in context mid-turn.
        "with-reasoning": CodexProfile(subtract_reasoning=False, rounds=True),
    }
)
DEFAULT_CODEX_PROFILE = CODEX_PROFILES["reference"]
