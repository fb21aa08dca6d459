"""The worker's operating surface on Faust's own web server: `/healthz`, `/readyz`, `/metrics`, and the lag sampler.

Faust starts its web server before the consumer and the table recovery, so `/healthz` answers from the start and
`/readyz` says why the worker is not ready yet: Kafka unreachable, no partitions assigned, a rebalance or table
recovery under way, ClickHouse unreachable (checked only when the worker writes to ClickHouse), or an agent whose
batches keep failing (each is then read again from its committed offset and nothing moves; `failing` names it).
Kafka is probed every second by a task of the worker too, which gives the log an outage's first and last lines
(core/logs.py).

`/healthz` fails only when a rebalance is stuck (`RebalanceWatch`: no progress for `stuck_rebalance_seconds`); the
worker then logs, once, what the rebalance waits for. A supervisor that restarts a worker failing /healthz ends it,
and a restart is safe: offsets are committed only for what was applied.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable, Set
from typing import Any

import faust
from faust.types import TP
from faust.web import Request, Response, View

from core.health import ClickHouseProbe, FailingAgents, KafkaProbe, Readiness, RebalanceWatch, metrics_text
from core.settings import Settings
from streams.metrics import observe_lag, partition_lag
from streams.runtime.stacks import task_stacks

LAG_SAMPLE_SECONDS = 5.0
REBALANCE_WATCH_SECONDS = 5.0
REBALANCE_CODE = ("faust/tables/recovery.py", "faust/transport/consumer.py", "faust/app/base.py", "/streams/")
"""Files whose frames in a task's await chain make it worth showing in a stuck rebalance's report."""
log = logging.getLogger(__name__)


async def worker_readiness(
    app: faust.App,
    probe: ClickHouseProbe | None,
    kafka: KafkaProbe | None = None,
    failures: FailingAgents | None = None,
) -> Readiness:
    recovery = app.tables.recovery
    checks = {} if kafka is None else {"kafka": await kafka.reachable()}
    checks |= {
        "partitions_assigned": bool(app.consumer.assignment()),
        "tables_recovered": not app.rebalancing and recovery.completed.is_set() and not recovery.in_recovery,
    }
    if probe is not None:
        checks["clickhouse"] = await probe.reachable()
    failing = failures.failing() if failures is not None else {}
    checks["agents_applying"] = not failing
    return Readiness(checks, failing)


async def consumer_lags(app: faust.App, prefix: str) -> dict[tuple[str, int], int]:
    """Lag of each assigned input partition (the topology's prefixed topics; table changelogs are paused after
    recovery, so their position says nothing about the work left)."""
    consumer = app.consumer
    lags = {}
    for tp in consumer.assignment():
        if tp.topic.startswith(prefix):
            lag = partition_lag(consumer.highwater(tp), await consumer.position(tp))
            if lag is not None:
                lags[(tp.topic, tp.partition)] = lag
    return lags


def rebalance_progress(app: faust.App) -> Hashable:
    """What changes while a rebalance advances: the group generation, and the table recovery's phase and offsets."""
    recovery = app.tables.recovery
    return (
        app.consumer_generation_id,
        recovery.in_recovery,
        recovery.completed.is_set(),
        frozenset(recovery.active_offsets.items()),
    )


def rebalance_report(app: faust.App, stuck_seconds: float) -> str:
    """What a stuck rebalance waits for: the recovery's phase, the changelogs it still reads, the consumer's state,
    and every task's await chain (first those through Faust's recovery and consumer code, or ours)."""
    recovery, consumer = app.tables.recovery, app.consumer
    remaining = {f"{tp.topic}[{tp.partition}]": stats.remaining for tp, stats in recovery.active_stats().items()}
    summary = (
        f"rebalance stuck: no progress for {stuck_seconds:.0f} s (generation {app.consumer_generation_id}, "
        f"in recovery {recovery.in_recovery}, recovery completed {recovery.completed.is_set()}, "
        f"changelog records left {remaining or 'none'}, {len(consumer.assignment())} partitions assigned, "
        f"{len(consumer._paused_partitions)} paused, flow {'active' if app.flow_control.is_active() else 'suspended'})"
    )
    stacks = task_stacks(asyncio.get_running_loop(), first=lambda frame: any(code in frame for code in REBALANCE_CODE))
    return "\n".join([summary, *stacks])


def install(app: faust.App, settings: Settings, probe: ClickHouseProbe | None, failures: FailingAgents) -> None:
    """Register the pages (served when `settings.worker_web_port` enables the web server), the lag sampler and the
    rebalance watch. `/readyz` fails while an agent's batches keep failing (`failures`)."""
    watch = RebalanceWatch(settings.stuck_rebalance_seconds)
    assert settings.kafka_bootstrap_servers is not None  # the app was created with it
    kafka = KafkaProbe(settings.kafka_bootstrap_servers)

    @app.page("/healthz")
    async def healthz(self: View, request: Request) -> Response:
        stuck = watch.stuck_for(time.monotonic())
        if stuck is None:
            return self.json({"alive": True})
        return self.json({"alive": False, "rebalance_stuck_seconds": round(stuck)}, status=503)

    @app.page("/readyz")
    async def readyz(self: View, request: Request) -> Response:
        readiness = await worker_readiness(app, probe, kafka, failures)
        return self.json(readiness.body(), status=readiness.status)

    @app.page("/metrics")
    async def metrics(self: View, request: Request) -> Response:
        body, content_type = metrics_text()
        return self.bytes(body, headers={"Content-Type": content_type})

    @app.timer(LAG_SAMPLE_SECONDS, name="sample_consumer_lag")
    async def sample_lag() -> None:
        if not app.rebalancing:
            observe_lag(await consumer_lags(app, settings.topic_prefix))

    @app.task
    async def watch_kafka() -> None:
        await kafka.watch()

    watching: list[asyncio.Task[None]] = []

    @app.on_partitions_revoked.connect
    async def watch_from_the_first_rebalance(sender: faust.App, revoked: Set[TP], **kwargs: Any) -> None:
        # Not an app timer: Faust starts those only once the first table recovery is over.
        if not watching:
            watching.append(asyncio.ensure_future(_watch_rebalances(app, watch)))


async def _watch_rebalances(app: faust.App, watch: RebalanceWatch) -> None:
    while True:
        await asyncio.sleep(REBALANCE_WATCH_SECONDS)
        now = time.monotonic()
        watch.observe(now, app.rebalancing, rebalance_progress(app))
        stuck = watch.stuck_for(now)
        if stuck is not None and not watch.reported:
            watch.reported = True
            log.error(rebalance_report(app, stuck))
