"""The worker's operating surface on Faust's own web server: `/healthz`, `/readyz`, `/metrics`, and the lag sampler.

Faust starts its web server before the consumer and the table recovery, so `/healthz` answers from the start and
`/readyz` says why the worker is not ready yet: no partitions assigned, a rebalance or table recovery under way, or
ClickHouse unreachable (checked only when the worker writes to ClickHouse).
"""

from __future__ import annotations

import faust
from faust.web import Request, Response, View

from streams.health import ClickHouseProbe, Readiness, metrics_text
from streams.metrics import observe_lag, partition_lag
from streams.settings import Settings

LAG_SAMPLE_SECONDS = 5.0


async def worker_readiness(app: faust.App, probe: ClickHouseProbe | None) -> Readiness:
    recovery = app.tables.recovery
    checks = {
        "partitions_assigned": bool(app.consumer.assignment()),
        "tables_recovered": not app.rebalancing and recovery.completed.is_set() and not recovery.in_recovery,
    }
    if probe is not None:
        checks["clickhouse"] = await probe.reachable()
    return Readiness(checks)


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


def install(app: faust.App, settings: Settings, probe: ClickHouseProbe | None) -> None:
    """Register the pages (served when `settings.worker_web_port` enables the web server) and the lag sampler."""

    @app.page("/healthz")
    async def healthz(self: View, request: Request) -> Response:
        return self.json({"alive": True})

    @app.page("/readyz")
    async def readyz(self: View, request: Request) -> Response:
        readiness = await worker_readiness(app, probe)
        return self.json(readiness.body(), status=readiness.status)

    @app.page("/metrics")
    async def metrics(self: View, request: Request) -> Response:
        body, content_type = metrics_text()
        return self.bytes(body, headers={"Content-Type": content_type})

    @app.timer(LAG_SAMPLE_SECONDS, name="sample_consumer_lag")
    async def sample_lag() -> None:
        if not app.rebalancing:
            observe_lag(await consumer_lags(app, settings.topic_prefix))
