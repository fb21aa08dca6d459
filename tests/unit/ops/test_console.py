"""`ctxbudget run`'s progress line: read from the process's own metrics, rates over the time between readings."""

from __future__ import annotations

from types import SimpleNamespace

from streams import metrics
from streams.console import ENGINE, Reading, progress_line


def test_a_reading_follows_the_metrics_the_worker_records() -> None:
    before = Reading.read()
    message = SimpleNamespace(topic="ctx.snapshots", timestamp=100.0)
    metrics.observe_batch(ENGINE, [message] * 3, done_at=101.0)
    metrics.observe_batch("thread_projection", [message], done_at=101.0)
    metrics.SINK_ROWS_WRITTEN.labels("context_events").inc(7)
    after = Reading.read()
    assert after.records_in - before.records_in == 3  # the engine's inputs only
    assert after.rows_written - before.rows_written == 7


def test_the_line_gives_totals_rates_and_every_level() -> None:
    before = Reading(records_in=1_000, rows_written=5_000)
    now = Reading(
        records_in=3_500,
        levels={"safe": 12, "watch": 3, "urgent": 1},
        stale=2,
        rows_written=9_000,
        lag=40,
    )
    assert progress_line(before, now, 10.0) == (
        "records in 3,500 (250/s) | threads: safe 12 watch 3 urgent 1 critical 0, stale 2"
        " | rows written 9,000 (400/s) | lag 40"
    )
