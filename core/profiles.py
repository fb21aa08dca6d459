"""Model profiles: where each agent tool compacts, and the percent its own UI shows (issue 6, REFERENCES.md).

One profile per tool, used by the reporter (a worker's readings) and by the projection (the pipeline's estimate), so
both give a thread the same two figures.

The budget is room left before *compaction*, not before the raw window:

    context_budget_remaining_pct = (compaction_point - max(used, baseline)) / (compaction_point - baseline) x 100

clamped to 0..100, where `baseline` is the fixed prompt and tool overhead the tool itself leaves out of its percent
(Codex: 12,000; others: 0). Each profile also reports `shown_pct`, the figure the user sees in that tool (a snapshot's
`shown_remaining_pct`), so the two can be put side by side. Each tool's is checked against its own output:
- Codex: `percent_of_context_window_remaining`, room in the window above its baseline (REFERENCES.md), rounded the
  way the Codex version in use rounds (`CodexProfile.displayed_pct`);
- Claude Code: the status line's `context_window.remaining_percentage`, room in the raw window for the last reply's
  prompt tokens (tests/data/claude_code/statusline-2.1.328.jsonl), not room to its compaction point.

The compaction point is a formula per tool that the vendors move without a release: a profile also holds the points
the threshold compactions seen taught it per (tool, model, window) (`core.compaction_points`), bounded around it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Self

from core.compaction_points import LearnedPoints, PointKey

CODEX_BASELINE_TOKENS = 12_000
"""Codex `BASELINE_TOKENS`: fixed system prompt and tool overhead, excluded from the percent it shows."""
CODEX_AUTO_COMPACT_PERCENT = 90
"""Codex compacts once the last `total_tokens` reach 90% of the MODEL's window (244,800 for 272,000; Codex 0.169.0)."""
CODEX_USABLE_WINDOW_PERCENT = 95
"""The window Codex reports is the usable one, the model's x `effective_context_window_percent` 95%."""
CODEX_WINDOW_TOKENS = 258_400
"""The usable window Codex reports for a 272,000-token model."""
CODEX_COMPACTION_JITTER_PCT = 5.0
"""Users see Codex compact anywhere from 70% to 98%: the forecast band is this many points of the window each side."""
CLAUDE_CODE_WINDOW_TOKENS = 200_000
CLAUDE_CODE_LONG_WINDOW_TOKENS = 1_000_000
"""Models run with the 1M-token context (`[1m]` in the model name)."""
CLAUDE_CODE_MAX_OUTPUT_TOKENS = 32_000
CLAUDE_CODE_OUTPUT_RESERVE_CAP = 10_000
"""Effective window = window - min(max output, 10,000). Published accounts give 20,000 (167,000 at 200k); Claude Code
2.1.328 compacted at about 177,000 with `CLAUDE_CODE_AUTO_COMPACT_WINDOW=200000` (REFERENCES.md), comparing the last
reply's input + cache creation + cache read + OUTPUT tokens with it. Only that sum is measured (23,000 below 200k),
not how it splits between this reserve and the buffer."""
CLAUDE_CODE_AUTO_COMPACT_BUFFER = 13_000
"""Auto-compaction at effective window - 13,000 (177,000 = 88.5% of 200k)."""
GENERIC_WINDOW_TOKENS = 128_000
GENERIC_COMPACTION_FRACTION = 0.8
"""Seed 000 1.2: `CompactionService` compacts at window x 0.8."""


def _clamp_pct(value: float) -> float:
    return min(100.0, max(0.0, value))


@dataclass(frozen=True)
class TokenUsage:
    """One breakdown of a tool's token usage (a request's `last`, or Codex's cumulative `total`)."""

    total_tokens: int
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    cache_write_input_tokens: int = 0
    """Newer Codex versions' prompt tokens written to the cache (`cache_write_input_tokens`, app-server
    `cacheWriteInputTokens`): part of the input, so the occupancy is unchanged; kept with the breakdown."""
    includes_reasoning: bool | None = None
    """What a Codex rollout's `last_usage_includes_reasoning` says (0.169.0 writes it beside the last usage): whether
    Codex counts this usage's reasoning tokens in its context. None where the source does not say."""


@dataclass(frozen=True)
class ModelProfile(ABC):
    """Compaction point and shown percent of one agent tool. Subclasses give `default_point` and `shown_pct`."""

    name: str
    default_window_tokens: int
    baseline_tokens: int = 0
    compaction_jitter_pct: float = 0.0
    """How far (percentage points of the window) the real compaction point may sit either side of the nominal one."""
    learned: LearnedPoints = field(default_factory=LearnedPoints)
    """The points threshold compactions showed, per (tool, model, window); none in the projection's profiles."""

    @abstractmethod
    def default_point(self, window: int) -> int:
        """Where the tool compacts by its formula."""

    @abstractmethod
    def shown_pct(self, used: int, window: int) -> float:
        """The percent the tool itself displays for `used` tokens, unrounded."""

    def window(self, model: str | None) -> int:
        """The window a model runs with when no source says."""
        return self.default_window_tokens

    def compaction_point(self, window: int, model: str | None = None) -> int:
        """The learned point of the model and window, else the formula's."""
        if not self.learned.samples:  # the projection's profiles learn nothing: skip the key on its hot path
            return self.default_point(window)
        return self.learned.point(PointKey(self.name, model or "", window), self.default_point(window))

    def observe_automatic_compaction(
        self, model: str | None, tokens_before: int, after_api_error: bool = False
    ) -> Self:
        """With one more automatic compaction seen (ignored unless it fired at the threshold)."""
        window = self.window(model)
        key = PointKey(self.name, model or "", window)
        learned = self.learned.observe(key, tokens_before, self.default_point(window), after_api_error)
        return self if learned is self.learned else replace(self, learned=learned)

    def remaining_pct(self, used: int, window: int, model: str | None = None, point: int | None = None) -> float:
        """Room left before `point` (the fleet's learned one), else before this profile's."""
        point = self.compaction_point(window, model) if point is None else point
        span = point - self.baseline_tokens
        if span <= 0:
            return 0.0
        return _clamp_pct((point - max(used, self.baseline_tokens)) / span * 100)

    def compaction_band(self, window: int, point: int | None = None) -> tuple[int, int]:
        """Earliest and latest plausible compaction points around `point`, else around this profile's."""
        point = self.compaction_point(window) if point is None else point
        jitter = round(window * self.compaction_jitter_pct / 100)
        return max(self.baseline_tokens, point - jitter), min(window, point + jitter)


@dataclass(frozen=True)
class CodexProfile(ModelProfile):
    """`window` is the usable window Codex reports (rollouts, app-server, samples), not the model's. Codex versions
    differ in two details of their displayed percent (`CODEX_VERSIONS`); the default is the versions in use."""

    name: str = "codex"
    default_window_tokens: int = CODEX_WINDOW_TOKENS
    baseline_tokens: int = CODEX_BASELINE_TOKENS
    compaction_jitter_pct: float = CODEX_COMPACTION_JITTER_PCT
    auto_compact_percent: int = CODEX_AUTO_COMPACT_PERCENT
    usable_window_percent: int = CODEX_USABLE_WINDOW_PERCENT
    subtract_reasoning: bool = False
    """Reasoning output of earlier turns is dropped from the context, so older versions left it out of the count."""
    rounds: bool = True
    """Newer versions round the displayed percent to the nearest one (halves away from zero); older ones truncate."""

    def default_point(self, window: int) -> int:
        """90% of the model's window, which is the reported usable window / 95% (integers: 258,400 -> 244,800)."""
        return min(window, window * self.auto_compact_percent // self.usable_window_percent)

    def shown_pct(self, used: int, window: int) -> float:
        """Codex `percent_of_context_window_remaining`, unrounded (its versions differ in rounding)."""
        if window <= self.baseline_tokens:
            return 0.0
        effective = window - self.baseline_tokens
        return _clamp_pct((effective - max(used - self.baseline_tokens, 0)) / effective * 100)

    def tokens_in_context_window(self, last: TokenUsage) -> int:
        """Occupancy from the LAST request's usage: the cumulative total exceeds the window after compactions. Where
        the usage says whether Codex counts its reasoning, that decides; else this version does."""
        subtract = self.subtract_reasoning if last.includes_reasoning is None else not last.includes_reasoning
        if subtract:
            return max(last.total_tokens - last.reasoning_output_tokens, 0)
        return last.total_tokens

    def displayed_pct(self, last: TokenUsage, window: int) -> int:
        """The percent left exactly as this Codex version displays it, 0..100."""
        fraction = self.shown_pct(self.tokens_in_context_window(last), window)
        # Rust's f64::round rounds halves away from zero; Python's round() would round them to even.
        return math.floor(fraction + 0.5) if self.rounds else math.floor(fraction)


CODEX_VERSIONS: Mapping[str, CodexProfile] = MappingProxyType(
    {
        # The last request's `total - reasoning_output`, rounded (Codex from Oct 2025).
        "reference": CodexProfile(subtract_reasoning=True, rounds=True),
        # Codex before Oct 2025: the same count, truncated.
        "truncating": CodexProfile(subtract_reasoning=True, rounds=False),
        # Codex from Nov 2025 (openai/codex #6161) to 0.169.0 (REFERENCES.md: current versions count the last
        # `total_tokens`): reasoning tokens count too, since they may stay in context mid-turn.
        "with-reasoning": CodexProfile(),
    }
)
"""How each Codex version turns usage into its displayed percent; a rollout's `last_usage_includes_reasoning`
overrides any version's count."""
DEFAULT_CODEX_VERSION = CODEX_VERSIONS["with-reasoning"]
"""The versions in use."""


@dataclass(frozen=True)
class ClaudeCodeProfile(ModelProfile):
    name: str = "claude-code"
    default_window_tokens: int = CLAUDE_CODE_WINDOW_TOKENS
    max_output_tokens: int = CLAUDE_CODE_MAX_OUTPUT_TOKENS

    def window(self, model: str | None) -> int:
        return CLAUDE_CODE_LONG_WINDOW_TOKENS if model and "[1m]" in model else self.default_window_tokens

    def effective_window(self, window: int) -> int:
        return window - min(self.max_output_tokens, CLAUDE_CODE_OUTPUT_RESERVE_CAP)

    def default_point(self, window: int) -> int:
        """Claude Code compares the last reply's prompt + output tokens with this point."""
        return max(0, self.effective_window(window) - CLAUDE_CODE_AUTO_COMPACT_BUFFER)

    def shown_pct(self, used: int, window: int) -> float:
        """The status line's `remaining_percentage`: room in the raw window for the last reply's prompt tokens."""
        return _clamp_pct((window - used) / window * 100) if window > 0 else 0.0


@dataclass(frozen=True)
class GenericProfile(ModelProfile):
    name: str = "generic"
    default_window_tokens: int = GENERIC_WINDOW_TOKENS
    compaction_fraction: float = GENERIC_COMPACTION_FRACTION

    def default_point(self, window: int) -> int:
        return int(window * self.compaction_fraction)

    def shown_pct(self, used: int, window: int) -> float:
        """A plain context meter: room left in the raw window."""
        return _clamp_pct((window - used) / window * 100) if window > 0 else 0.0


def _default_profiles() -> Mapping[str, ModelProfile]:
    return MappingProxyType({p.name: p for p in (CodexProfile(), ClaudeCodeProfile(), GenericProfile())})


@dataclass(frozen=True)
class ProfileSet:
    """The configured profiles and which one a thread uses, chosen by the model of its latest usage sample."""

    profiles: Mapping[str, ModelProfile] = field(default_factory=_default_profiles)
    by_model_prefix: tuple[tuple[str, str], ...] = (("gpt-5", "codex"), ("codex", "codex"), ("claude", "claude-code"))
    """(model name prefix, profile name), first match wins."""
    default: str = "generic"

    def __post_init__(self) -> None:
        unknown = {self.default, *(name for _, name in self.by_model_prefix)} - set(self.profiles)
        if unknown:
            raise ValueError(f"unknown profiles: {sorted(unknown)}")

    def for_model(self, model: str | None) -> ModelProfile:
        if model is not None:
            lowered = model.lower()
            for prefix, name in self.by_model_prefix:
                if lowered.startswith(prefix):
                    return self.profiles[name]
        return self.profiles[self.default]


def window_tokens(profile: ModelProfile, manifest_window: int | None, sample_window: int | None) -> int:
    """The latest manifest's effective window, else the usage sample's, else the profile's default."""
    return manifest_window or sample_window or profile.default_window_tokens
