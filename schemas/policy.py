"""Threshold policies (spec 4): where the level bands start, per project with a default."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from schemas.base import Id, Percent, Record, Timestamp

DEFAULT_POLICY_PROJECT_ID: Literal["*"] = "*"
"""Key of the policy that applies to every project without its own."""

# Spec 4 defaults. Bands are half-open: safe is [60, 100], watch [40, 60), urgent [25, 40), critical [0, 25).
DEFAULT_SAFE_MIN_PCT = 60.0
DEFAULT_WATCH_MIN_PCT = 40.0
DEFAULT_URGENT_MIN_PCT = 25.0

BandStart = Annotated[Percent, Field(gt=0, le=100)]


class ThresholdPolicy(Record):
    """Lower bounds of the safe, watch and urgent bands; everything below `urgent_min_pct` is critical.

    The three bounds are strictly ordered inside (0, 100], so the four bands are non-empty, ordered and cover 0..100.
    """

    project_id: Id | Literal["*"] = Field(description="The project it applies to; `*` is the default for all others.")
    safe_min_pct: BandStart = DEFAULT_SAFE_MIN_PCT
    watch_min_pct: BandStart = DEFAULT_WATCH_MIN_PCT
    urgent_min_pct: BandStart = DEFAULT_URGENT_MIN_PCT
    updated_at: Timestamp | None = Field(default=None, description="When it was set; the latest one wins.")

    @model_validator(mode="after")
    def _bands_are_ordered(self) -> ThresholdPolicy:
        if not (self.urgent_min_pct < self.watch_min_pct < self.safe_min_pct):
            raise ValueError(
                "thresholds must satisfy 0 < urgent_min_pct < watch_min_pct < safe_min_pct <= 100, got "
                f"urgent={self.urgent_min_pct}, watch={self.watch_min_pct}, safe={self.safe_min_pct}"
            )
        return self


DEFAULT_POLICY = ThresholdPolicy(project_id=DEFAULT_POLICY_PROJECT_ID)
