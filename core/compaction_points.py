"""Where a tool really compacts, learned from the compactions it announced (their `preTokens` / tokens before).

Only threshold compactions teach anything: a reactive one (the model server refused the prompt as too long, at any
size: 27,030 tokens was seen) says nothing about the threshold. A compaction counts when it does not follow an API
error and its tokens lie in a plausible band around the profile's default point. What is learned is kept per
(tool, model, window), since each has its own point, as a bounded window of recent samples; the point is their median
after dropping outliers (more than `OUTLIER_MADS` scaled median absolute deviations away), which stays inside the band.
Pure: the reporter keeps the samples with its read positions; the pipeline can fold the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from types import MappingProxyType

BAND_FRACTION = 0.25
"""A learned point lies within 25% of the profile's default (and never above the window): Codex users see it fire
from 70% to 98% of the usable window around its 90%-of-the-model default, Claude Code moved from 167,000 to 177,000."""
SAMPLES_KEPT = 15
"""Recent samples per key: a point the vendor moves is followed within a few compactions."""
KEYS_KEPT = 64
"""(tool, model, window) keys remembered, least recently observed dropped first."""
OUTLIER_MADS = 3.0
MAD_TO_SIGMA = 1.4826
"""Scales the median absolute deviation to a standard deviation for normal data."""


@dataclass(frozen=True, order=True)
class PointKey:
    tool: str
    model: str
    window: int


def compaction_band(default_point: int, window: int) -> tuple[int, int]:
    """The plausible compaction points around a profile's default."""
    spread = round(default_point * BAND_FRACTION)
    return max(1, default_point - spread), min(window, default_point + spread)


def is_threshold_compaction(tokens_before: int, default_point: int, window: int, after_api_error: bool) -> bool:
    """Whether a compaction fired at the tool's threshold (not reactively, not at an implausible size)."""
    low, high = compaction_band(default_point, window)
    return not after_api_error and low <= tokens_before <= high


def robust_point(samples: Sequence[int]) -> int | None:
    """The median of the samples within `OUTLIER_MADS` scaled MADs of their median; None without samples."""
    if not samples:
        return None
    centre = median(samples)
    spread = MAD_TO_SIGMA * median(abs(s - centre) for s in samples)
    kept = [s for s in samples if abs(s - centre) <= OUTLIER_MADS * spread] if spread > 0 else list(samples)
    return round(median(kept or samples))


@dataclass(frozen=True)
class LearnedPoints:
    samples: Mapping[PointKey, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Recent threshold compactions' tokens per key, oldest first; keys in order of their last observation."""

    def observe(
        self, key: PointKey, tokens_before: int, default_point: int, after_api_error: bool = False
    ) -> LearnedPoints:
        """With one more compaction of the key; unchanged when it was not a threshold compaction."""
        if not is_threshold_compaction(tokens_before, default_point, key.window, after_api_error):
            return self
        kept = (*self.samples.get(key, ()), tokens_before)[-SAMPLES_KEPT:]
        others = [(k, v) for k, v in self.samples.items() if k != key][-(KEYS_KEPT - 1) :]
        return LearnedPoints(MappingProxyType(dict([*others, (key, kept)])))

    def point(self, key: PointKey, default_point: int) -> int:
        """The learned point of the key, bounded to the band; the default while nothing was learned."""
        learned = robust_point(self.samples.get(key, ()))
        if learned is None:
            return default_point
        low, high = compaction_band(default_point, key.window)
        return min(high, max(low, learned))
