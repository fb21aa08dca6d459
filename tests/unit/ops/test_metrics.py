"""The recording helpers move the right series by the right amounts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace

from prometheus_client import REGISTRY

from core.engine_config import EngineConfig
from core.health import FAILING_AFTER, ClickHouseProbe, FailingAgents, Readiness
from schemas.policy import DEFAULT_POLICY
from sinks.batcher import Batch, Flush
from sinks.rows import TableSpec
from sinks.writer import Backoff
from streams.batching import InputMessage, dead_letter
from streams.engine.fold import apply_snapshot
from streams.metrics import (
    CountedBackoff,
    count_threads,
    hit_ratio,
    observe_batch,
    observe_flush,
    observe_lag,
    observe_outcomes,
    observe_rewinds,
    observe_sent,
    observe_sequenced,
    partition_lag,
    publish_census,
    watch_estimator,
)
from streams.projection.estimator import EstimatorStats
from streams.runtime.observability import worker_readiness
from tests.unit.engine.builders import at, snapshot


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@dataclass(frozen=True)
class Message:
    topic: str
    timestamp: float


def test_a_batch_counts_records_per_topic_and_observes_latency_from_the_record_timestamp() -> None:
    before = value("ctxbudget_records_consumed_total", agent="t_agent", topic="ctx.snapshots")
    sum_before = value("ctxbudget_processing_latency_seconds_sum", agent="t_agent")
    observe_batch("t_agent", [Message("ctx.snapshots", 100.0), Message("ctx.snapshots", 99.0)], done_at=101.0)
    assert value("ctxbudget_records_consumed_total", agent="t_agent", topic="ctx.snapshots") == before + 2
    assert value("ctxbudget_processing_latency_seconds_sum", agent="t_agent") == sum_before + 3.0


def test_dead_letters_are_counted_by_reason_and_logged_without_the_body(caplog) -> None:
    message = InputMessage("snapshots", 1, 7, b"thread-a", b'{"secret": "body"}')
    before = value("ctxbudget_dead_letters_total", reason="t_invalid_json")
    with caplog.at_level("INFO", logger="streams.metrics"):
        observe_sent([dead_letter(message, "t_invalid_json", "bad", datetime.now(UTC), "ctx.")] * 3)
    assert value("ctxbudget_dead_letters_total", reason="t_invalid_json") == before + 3
    assert all("secret" not in record.getMessage() and record.offset == 7 for record in caplog.records)


def test_outcomes_count_ignored_snapshots_by_verdict_and_level_mismatches() -> None:
    before = value("ctxbudget_snapshots_ignored_total", verdict="not_newer")
    mismatches = value("ctxbudget_level_mismatches_total")
    observe_outcomes({"snapshot_not_newer": 2, "level_mismatch": 1})
    assert value("ctxbudget_snapshots_ignored_total", verdict="not_newer") == before + 2
    assert value("ctxbudget_level_mismatches_total") == mismatches + 1


def test_sequencer_verdicts_other_than_apply_and_rewinds_are_counted_per_agent() -> None:
    dup = value("ctxbudget_records_sequenced_total", agent="t_fold", verdict="duplicate")
    ahead = value("ctxbudget_records_sequenced_total", agent="t_fold", verdict="ahead")
    gaps = value("ctxbudget_rewinds_total", agent="t_fold", reason="gap")
    stalls = value("ctxbudget_rewinds_total", agent="t_fold", reason="stall")
    observe_sequenced("t_fold", ["apply", "duplicate", "apply", "duplicate", "ahead"])
    observe_rewinds("t_fold", gaps=1, stalls=0)
    assert value("ctxbudget_records_sequenced_total", agent="t_fold", verdict="duplicate") == dup + 2
    assert value("ctxbudget_records_sequenced_total", agent="t_fold", verdict="ahead") == ahead + 1
    applied = {"agent": "t_fold", "verdict": "apply"}
    assert REGISTRY.get_sample_value("ctxbudget_records_sequenced_total", applied) is None
    assert value("ctxbudget_rewinds_total", agent="t_fold", reason="gap") == gaps + 1
    assert value("ctxbudget_rewinds_total", agent="t_fold", reason="stall") == stalls


def test_lag_is_highwater_minus_position_and_unowned_partitions_disappear() -> None:
    assert partition_lag(10, 4) == 6
    assert partition_lag(10, 12) == 0
    assert partition_lag(None, 4) is None
    observe_lag({("ctx.snapshots", 0): 6, ("ctx.snapshots", 1): 0})
    observe_lag({("ctx.snapshots", 1): 3})
    assert REGISTRY.get_sample_value("ctxbudget_consumer_lag", {"topic": "ctx.snapshots", "partition": "0"}) is None
    assert value("ctxbudget_consumer_lag", topic="ctx.snapshots", partition="1") == 3


def test_the_census_counts_threads_per_level_and_sets_empty_levels_to_zero() -> None:
    config = EngineConfig()
    states = [
        apply_snapshot(None, snapshot(pct, thread=f"t{i}"), DEFAULT_POLICY, at(0), config).slot.state
        for i, pct in enumerate((80, 80, 10))
    ]
    census = count_threads(states)
    publish_census(census)
    assert value("ctxbudget_threads", level="safe") == 2
    assert value("ctxbudget_threads", level="critical") == 1
    assert value("ctxbudget_threads", level="watch") == 0
    assert value("ctxbudget_threads_stale") == 0
    assert value("ctxbudget_open_alerts", alert_type="context_critical") == census.open_alerts["context_critical"] == 1
    assert value("ctxbudget_open_alerts", alert_type="context_watch") == 0


def test_a_flush_records_rows_per_table_and_its_duration() -> None:
    table = TableSpec("t_table", ())
    flush = Flush("ctx.alerts", 0, 0, 9, (Batch(table, [()] * 10, "tok"),))
    before = value("ctxbudget_sink_rows_written_total", table="t_table")
    observe_flush(flush, 0.25)
    assert value("ctxbudget_sink_rows_written_total", table="t_table") == before + 10
    assert value("ctxbudget_sink_batch_rows_count", table="t_table") >= 1
    assert value("ctxbudget_sink_insert_seconds_sum", topic="ctx.alerts") >= 0.25


def test_the_counted_backoff_counts_each_wait_it_hands_out() -> None:
    before = value("ctxbudget_sink_retries_total")
    delays = list(CountedBackoff(first_seconds=0.1, attempts=4).delays())
    assert delays == list(Backoff(first_seconds=0.1, attempts=4).delays())
    assert value("ctxbudget_sink_retries_total") == before + 3


def test_estimator_counters_are_read_from_its_stats_at_scrape_time() -> None:
    stats = EstimatorStats(texts=4, tokens_counted=120, cache_hits=3, cache_misses=1, heuristic_estimates=1)
    watch_estimator(stats)
    assert value("ctxbudget_estimator_tokens_total") == 120
    assert value("ctxbudget_estimator_cache_hit_ratio") == hit_ratio(stats) == 0.75
    stats.cache_hits += 4
    assert value("ctxbudget_estimator_cache_hits_total") == 7


async def test_worker_readiness_turns_false_while_clickhouse_is_down_and_true_when_it_returns() -> None:
    up = {"clickhouse": True}
    clock = {"now": 0.0}
    probe = ClickHouseProbe(lambda: up["clickhouse"], cache_seconds=1.0, clock=lambda: clock["now"])
    recovery = SimpleNamespace(completed=asyncio.Event(), in_recovery=False)
    recovery.completed.set()
    app = SimpleNamespace(
        consumer=SimpleNamespace(assignment=lambda: {("ctx.snapshots", 0)}),
        rebalancing=False,
        tables=SimpleNamespace(recovery=recovery),
    )
    assert (await worker_readiness(app, probe)).ready
    up["clickhouse"], clock["now"] = False, 2.0
    down = await worker_readiness(app, probe)
    assert (down.status, down.checks["clickhouse"]) == (503, False)
    up["clickhouse"], clock["now"] = True, 4.0
    assert (await worker_readiness(app, probe)).status == 200
    app.rebalancing = True  # a rebalance (or table recovery) under way: not ready whatever ClickHouse says
    assert not (await worker_readiness(app, probe)).checks["tables_recovered"]


def test_an_agent_whose_batches_keep_failing_makes_the_worker_unready_with_why() -> None:
    failures = FailingAgents()
    for _ in range(FAILING_AFTER - 1):
        failures.failed("thread_engine", RuntimeError("MessageSizeTooLargeError"))
    assert failures.failing() == {}  # a blip is not a failing agent
    failures.failed("thread_engine", RuntimeError("MessageSizeTooLargeError"))
    failing = failures.failing()
    why = f"{FAILING_AFTER} batches failed in a row, last: RuntimeError: MessageSizeTooLargeError"
    assert failing == {"thread_engine": why}
    body = Readiness({"kafka": True, "agents_applying": not failing}, failing).body()
    assert body == {"ready": False, "checks": {"kafka": True, "agents_applying": False}, "failing": failing}
    failures.applied("thread_engine")
    assert failures.failing() == {}
