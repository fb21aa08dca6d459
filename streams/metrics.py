"""The pipeline's Prometheus metrics, and the small recording functions the wiring calls at a few points.

Everything is registered on prometheus-client's default registry (with its process and GC collectors), served as
on `/metrics` by the worker (streams/runtime/observability.py) and the API (api/routes/health.py). Rates (records/s,
inserts/s, the estimator's cache hit rate) are left to PromQL over these counters: the dashboards in
deploy/grafana/ctxbudget.json show the expressions.

The recording functions take plain values (messages with a topic and a timestamp, emits, states, flushes), never
Faust objects, so they are tested without a broker. Gauges that describe what a worker owns (threads, lag, pending
rows) are per process: sum them over workers.
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schemas import (
    AlertStatus,
    AlertType,
    CompactionPointMoved,
    ContextAlert,
    ContextBudgetLevel,
    DeadLetter,
    PackageStatus,
)
from schemas.state import ThreadState
from sinks.batcher import Flush
from sinks.writer import Backoff
from streams.batching import DEADLETTER, Emit
from streams.projection.estimator import EstimatorStats

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: a healthy fold answers in tens of milliseconds; a worker catching up is minutes behind."""
ROW_BUCKETS = (1, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000)
"""Rows per insert: ClickHouse's guidance is 10k-100k rows per insert (see Settings.sink_batch_rows)."""

# -- folds (streams/runtime/agents.py) ---------------------------------------------------------------------------
RECORDS_CONSUMED = Counter(
    "ctxbudget_records_consumed", "Input records applied by a fold, by agent and topic.", ["agent", "topic"]
)
PROCESSING_LATENCY = Histogram(
    "ctxbudget_processing_latency_seconds",
    "From a record's Kafka timestamp (produce time) to the state update that applied it.",
    ["agent"],
    buckets=LATENCY_BUCKETS,
)
CONSUMER_LAG = Gauge(
    "ctxbudget_consumer_lag", "Records between the consumer's position and the partition's end.", ["topic", "partition"]
)
SEQUENCED = Counter(
    "ctxbudget_records_sequenced",
    "Records a fold's or sink's sequencer did not apply as they came: duplicate (delivered again, already applied) or "
    "ahead (a record before it is missing: held back until a rewind delivers the gap).",
    ["agent", "verdict"],
)
REWINDS = Counter(
    "ctxbudget_rewinds",
    "Partitions sought back to the first record they owe: gap (a record is missing) or stall (owes records and has "
    "not advanced). Each re-delivers records; many under a steady load are lost throughput.",
    ["agent", "reason"],
)
DEAD_LETTERS = Counter("ctxbudget_dead_letters", "Records sent to the dead-letter topic, by reason.", ["reason"])
SNAPSHOTS_IGNORED = Counter(
    "ctxbudget_snapshots_ignored",
    "Snapshots the engine did not apply: not_newer (duplicate or out of order), shadowed (lower-precedence source).",
    ["verdict"],
)
LEVEL_MISMATCHES = Counter(
    "ctxbudget_level_mismatches", "Accepted snapshots whose reported level differs from the engine's level."
)
TIMER_FAILURES = Counter(
    "ctxbudget_timer_failures", "Threads a fold's timer raised on (the thread keeps its state; the log has the error)."
)

# -- thread census (the engine's timer pass) -------------------------------------------------------------------------
THREADS = Gauge("ctxbudget_threads", "Threads owned by this worker, by the engine's budget level.", ["level"])
STALE_THREADS = Gauge("ctxbudget_threads_stale", "Threads owned by this worker whose report is overdue.")
OPEN_ALERTS = Gauge("ctxbudget_open_alerts", "Alerts not resolved (open or acked), by type.", ["alert_type"])
HANDOFF_PACKAGES = Gauge("ctxbudget_handoff_packages", "Threads' current handoff packages, by status.", ["status"])
COMPACTION_POINT_MOVES = Counter(
    "ctxbudget_compaction_point_moves",
    "Moves of a learned compaction point told to a project (one per project concerned), by tool: a vendor moved it.",
    ["agent_tool"],
)

# -- sinks (streams/clickhouse_writer.py) ------------------------------------------------------------------------------
SINK_BATCH_ROWS = Histogram("ctxbudget_sink_batch_rows", "Rows per ClickHouse insert.", ["table"], buckets=ROW_BUCKETS)
SINK_ROWS_WRITTEN = Counter("ctxbudget_sink_rows_written", "Rows inserted into ClickHouse.", ["table"])
SINK_INSERT_SECONDS = Histogram(
    "ctxbudget_sink_insert_seconds",
    "Time to write one flush (its offset plan and every table's insert), by source topic.",
    ["topic"],
    buckets=LATENCY_BUCKETS,
)
SINK_RETRIES = Counter("ctxbudget_sink_retries", "ClickHouse calls retried after a failure.")
SINK_PENDING = Gauge("ctxbudget_sink_pending_records", "Records the sink holds, not yet written.", ["topic"])


# -- folds -----------------------------------------------------------------------------------------------------------
class Consumed(Protocol):
    """What a fold consumed (a Faust message qualifies): its topic and Kafka timestamp in seconds."""

    @property
    def topic(self) -> str: ...

    @property
    def timestamp(self) -> float: ...


def observe_batch(agent: str, consumed: Sequence[Consumed], done_at: float | None = None) -> None:
    """Count a batch's applied records and their latency once its states are written (`done_at`: epoch seconds)."""
    done = time.time() if done_at is None else done_at
    for topic, count in Tally(message.topic for message in consumed).items():
        RECORDS_CONSUMED.labels(agent, topic).inc(count)
    latency = PROCESSING_LATENCY.labels(agent)
    for message in consumed:
        latency.observe(max(0.0, done - message.timestamp))


def observe_sequenced(agent: str, verdicts: Iterable[str]) -> None:
    """Count a batch's sequencer verdicts other than `apply`."""
    for verdict, count in Tally(v for v in verdicts if v != "apply").items():
        SEQUENCED.labels(agent, verdict).inc(count)


def observe_rewinds(agent: str, gaps: int, stalls: int) -> None:
    for reason, count in (("gap", gaps), ("stall", stalls)):
        if count:
            REWINDS.labels(agent, reason).inc(count)


def observe_outcomes(outcomes: Mapping[str, int]) -> None:
    """Count what a batch decided not to apply (`snapshot_<verdict>`), level mismatches (`level_mismatch`) and the
    threads a timer failed on (`tick_failed`)."""
    for outcome, count in outcomes.items():
        if outcome == "level_mismatch":
            LEVEL_MISMATCHES.inc(count)
        elif outcome == "tick_failed":
            TIMER_FAILURES.inc(count)
        elif outcome.startswith("snapshot_"):
            SNAPSHOTS_IGNORED.labels(outcome.removeprefix("snapshot_")).inc(count)


def observe_sent(emits: Iterable[Emit]) -> None:
    """Count dead letters by reason and log them, alert transitions (ids and reasons only, never a body) and moves of
    a learned compaction point (the operators' alert: `ctxbudget_compaction_point_moves`)."""
    for emit in emits:
        match emit.record:
            case DeadLetter() as letter if emit.topic == DEADLETTER:
                DEAD_LETTERS.labels(letter.reason).inc()
                log.info(
                    "dead letter",
                    extra={
                        "reason": letter.reason,
                        "source_topic": letter.source_topic,
                        "partition": letter.partition,
                        "offset": letter.offset,
                    },
                )
            case CompactionPointMoved() as moved:
                COMPACTION_POINT_MOVES.labels(moved.agent_tool).inc()
                log.warning(moved.reason, extra={"project_id": moved.project_id, "point_key": moved.point_key})
            case ContextAlert() as alert:
                log.info(
                    "alert %s",
                    alert.alert_status,
                    extra={
                        "thread_id": alert.thread_id,
                        "project_id": alert.project_id,
                        "alert_id": alert.alert_id,
                        "alert_type": alert.alert_type,
                        "alert_status": alert.alert_status,
                    },
                )


def partition_lag(highwater: int | None, position: int | None) -> int | None:
    """Records not yet read: the highwater is the next offset to be written, the position the next one to read."""
    if highwater is None or position is None:
        return None
    return max(0, highwater - position)


def observe_lag(lags: Mapping[tuple[str, int], int]) -> None:
    """Replace the lag gauges: partitions this worker no longer owns disappear."""
    CONSUMER_LAG.clear()
    for (topic, partition), lag in lags.items():
        CONSUMER_LAG.labels(topic, str(partition)).set(lag)


# -- thread census ---------------------------------------------------------------------------------------------------
@dataclass
class ThreadCensus:
    levels: Tally[ContextBudgetLevel] = field(default_factory=Tally)
    stale: int = 0
    open_alerts: Tally[AlertType] = field(default_factory=Tally)
    packages: Tally[PackageStatus] = field(default_factory=Tally)


def count_threads(states: Iterable[ThreadState]) -> ThreadCensus:
    census = ThreadCensus()
    for state in states:
        census.levels[state.context_budget_level] += 1
        census.stale += state.stale
        census.open_alerts.update(a.alert_type for a in state.open_alerts if a.alert_status is not AlertStatus.RESOLVED)
        if state.handoff is not None:
            census.packages[state.handoff.package_status] += 1
    return census


def publish_census(census: ThreadCensus) -> None:
    """Set every label of every enum (zeros included), so a level that empties drops to 0 instead of vanishing."""
    for level in ContextBudgetLevel:
        THREADS.labels(level.value).set(census.levels[level])
    STALE_THREADS.set(census.stale)
    for alert_type in AlertType:
        OPEN_ALERTS.labels(alert_type.value).set(census.open_alerts[alert_type])
    for status in PackageStatus:
        HANDOFF_PACKAGES.labels(status.value).set(census.packages[status])


# -- sinks -----------------------------------------------------------------------------------------------------------
def observe_flush(flush: Flush, seconds: float) -> None:
    """A flush written: its duration, and each table's batch size and rows."""
    SINK_INSERT_SECONDS.labels(flush.topic).observe(seconds)
    for batch in flush.batches:
        SINK_BATCH_ROWS.labels(batch.table.name).observe(len(batch.rows))
        SINK_ROWS_WRITTEN.labels(batch.table.name).inc(len(batch.rows))


def observe_sink_pending(pending: Mapping[str, int]) -> None:
    """Replace the pending-records gauges with the sink's current holdings by topic."""
    SINK_PENDING.clear()
    for topic, count in pending.items():
        SINK_PENDING.labels(topic).set(count)


class CountedBackoff(Backoff):
    """The sink's backoff, counting every wait it hands out: one wait is one retried ClickHouse call."""

    def delays(self) -> Iterator[float]:
        for delay in super().delays():
            SINK_RETRIES.inc()
            yield delay


# -- estimator -------------------------------------------------------------------------------------------------------
class EstimatorCollector(Collector):
    """Reads the worker's `TokenEstimator.stats` at scrape time: the tokenizer's hot path stays untouched."""

    def __init__(self) -> None:
        self.stats: EstimatorStats | None = None

    def collect(self) -> Iterator[Metric]:
        stats = self.stats or EstimatorStats()
        yield CounterMetricFamily(
            "ctxbudget_estimator_tokens", "Tokens counted by a real tokenizer run.", value=stats.tokens_counted
        )
        yield CounterMetricFamily("ctxbudget_estimator_cache_hits", "Texts answered from the cache.", stats.cache_hits)
        yield CounterMetricFamily(
            "ctxbudget_estimator_cache_misses", "Texts that ran the tokenizer or heuristic.", stats.cache_misses
        )
        yield CounterMetricFamily(
            "ctxbudget_estimator_heuristic_estimates",
            "Texts estimated as UTF-8 bytes / 4 (the encoding was not available).",
            value=stats.heuristic_estimates,
        )
        yield GaugeMetricFamily(
            "ctxbudget_estimator_cache_hit_ratio", "Cache hits over lookups since start.", value=hit_ratio(stats)
        )


def hit_ratio(stats: EstimatorStats) -> float:
    lookups = stats.cache_hits + stats.cache_misses
    return stats.cache_hits / lookups if lookups else 0.0


ESTIMATOR = EstimatorCollector()
REGISTRY.register(ESTIMATOR)


def watch_estimator(stats: EstimatorStats) -> None:
    """Serve this estimator's counters (one estimator per worker process)."""
    ESTIMATOR.stats = stats
