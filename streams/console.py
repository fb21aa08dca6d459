"""The live progress line `ctxbudget run` prints: records in, the fleet by level, rows written to ClickHouse, lag.

Read from this process's own Prometheus metrics (streams/metrics.py), so the line says what `/metrics` says:
`Reading.read` takes a reading, `progress_line` (pure) turns two readings into one line with rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.metrics import MetricWrapperBase

from schemas import ContextBudgetLevel
from streams import metrics

ENGINE = "thread_engine"


@dataclass(frozen=True)
class Reading:
    records_in: float
    """Input records the engine applied (snapshots, session events, handoff packages, acks)."""
    levels: dict[str, float] = field(default_factory=dict)
    stale: float = 0.0
    rows_written: float = 0.0
    lag: float = 0.0
    """Records on the worker's partitions it has not fetched yet."""

    @classmethod
    def read(cls) -> Reading:
        return cls(
            records_in=_total(metrics.RECORDS_CONSUMED, agent=ENGINE),
            levels={level.value: _total(metrics.THREADS, level=level.value) for level in ContextBudgetLevel},
            stale=_total(metrics.STALE_THREADS),
            rows_written=_total(metrics.SINK_ROWS_WRITTEN),
            lag=_total(metrics.CONSUMER_LAG),
        )


def progress_line(before: Reading, now: Reading, seconds: float) -> str:
    """One line: totals with per-second rates since `before`, `seconds` ago."""
    rate = (now.records_in - before.records_in) / seconds if seconds > 0 else 0.0
    rows = (now.rows_written - before.rows_written) / seconds if seconds > 0 else 0.0
    levels = " ".join(f"{level} {now.levels.get(level.value, 0):,.0f}" for level in ContextBudgetLevel)
    return (
        f"records in {now.records_in:,.0f} ({rate:,.0f}/s) | threads: {levels}, stale {now.stale:,.0f}"
        f" | rows written {now.rows_written:,.0f} ({rows:,.0f}/s) | lag {now.lag:,.0f}"
    )


def _total(metric: MetricWrapperBase, **labels: str) -> float:
    """The sum of the metric's values (a counter's `_total`, not its `_created`) over the samples with `labels`."""
    return sum(
        sample.value
        for family in metric.collect()
        for sample in family.samples
        if not sample.name.endswith("_created") and all(sample.labels.get(k) == v for k, v in labels.items())
    )
