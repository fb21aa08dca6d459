"""When will the thread compact: exponentially weighted growth per turn and per second, and large-message sizes.

A usage sample is a turn. Growth is the rise of the sampled prompt between two samples; a fall means a compaction
happened in between and is not growth, so it is skipped. Means and variances are exponentially weighted (West's
incremental form), so the forecast follows a thread whose pace changes. The band around `compaction_expected_at`
combines the spread of the rate (`band_sigmas` standard deviations) with the profile's spread of the compaction point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.base import MAX_TOKENS
from schemas.projection import GrowthStats

MAX_COUNT = 1_000_000_000
"""Bound of a `Count` field: remaining turns or messages beyond it are reported as this."""


@dataclass(frozen=True)
class ForecastConfig:
    alpha: float = 0.3
    """Weight of the newest observation in every running mean."""
    large_message_tokens: int = 2_000
    """A surface addition at least this big is a large message (a file read, a long tool result)."""
    band_sigmas: float = 1.0
    horizon: timedelta = timedelta(days=7)
    """A compaction further away than this is not forecast (the time is left empty)."""


@dataclass(frozen=True)
class Forecast:
    estimated_remaining_turns: int | None = None
    estimated_remaining_large_messages: int | None = None
    compaction_expected_at: datetime | None = None
    compaction_expected_low_at: datetime | None = None
    compaction_expected_high_at: datetime | None = None


def _ewm(mean: float, var: float, value: float, alpha: float) -> tuple[float, float]:
    if mean == 0 and var == 0:
        return value, 0.0  # no information yet: the first observation seeds the mean instead of being damped by zero
    diff = value - mean
    step = alpha * diff
    return mean + step, (1 - alpha) * (var + diff * step)


def observe_turn(growth: GrowthStats, tokens: int, at: datetime, config: ForecastConfig) -> GrowthStats:
    """A usage sample of `tokens` prompt tokens at `at`."""
    update: dict[str, object] = {"turns": growth.turns + 1, "last_turn_at": at, "last_turn_tokens": tokens}
    if growth.last_turn_tokens is not None and growth.last_turn_at is not None:
        delta = tokens - growth.last_turn_tokens
        seconds = (at - growth.last_turn_at).total_seconds()
        if delta >= 0:
            update["tokens_per_turn"], update["tokens_per_turn_var"] = _ewm(
                growth.tokens_per_turn, growth.tokens_per_turn_var, delta, config.alpha
            )
            if seconds > 0:
                update["tokens_per_second"], update["tokens_per_second_var"] = _ewm(
                    growth.tokens_per_second, growth.tokens_per_second_var, delta / seconds, config.alpha
                )
    return growth.model_copy(update=update)


def observe_addition(growth: GrowthStats, tokens: int, config: ForecastConfig) -> GrowthStats:
    """A surface addition; only large ones shape the large-message size."""
    if tokens < config.large_message_tokens:
        return growth
    mean, _ = _ewm(growth.large_message_tokens, 0.0, tokens, config.alpha)
    return growth.model_copy(update={"large_messages": growth.large_messages + 1, "large_message_tokens": mean})


def _count_of(room: int, size: float) -> int | None:
    return min(MAX_COUNT, math.floor(room / size)) if size > 0 else None


def _time_to(room: int, rate: float, now: datetime, horizon: timedelta) -> datetime | None:
    if rate <= 0:
        return None
    seconds = room / rate
    return now + timedelta(seconds=seconds) if seconds <= horizon.total_seconds() else None


def forecast(
    growth: GrowthStats,
    used: int,
    band: tuple[int, int, int],
    now: datetime,
    config: ForecastConfig,
) -> Forecast:
    """Turns, large messages and time left before compaction. `band` = (earliest, nominal, latest) compaction point."""
    early, point, late = (max(0, min(MAX_TOKENS, p - used)) for p in band)
    rate = growth.tokens_per_second
    spread = config.band_sigmas * math.sqrt(growth.tokens_per_second_var)
    return Forecast(
        estimated_remaining_turns=_count_of(point, growth.tokens_per_turn),
        estimated_remaining_large_messages=_count_of(point, growth.large_message_tokens),
        compaction_expected_at=_time_to(point, rate, now, config.horizon),
        compaction_expected_low_at=_time_to(early, rate + spread, now, config.horizon),
        compaction_expected_high_at=_time_to(late, rate - spread, now, config.horizon),
    )
