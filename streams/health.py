"""Health checks shared by the worker and the API: liveness is "the process answers"; readiness is a set of named
checks that must all pass (`/readyz` answers 503 with the failing ones otherwise).

ClickHouse reachability is probed with clickhouse-connect's `ping` (GET /ping on a server, in-process for chdb), off
the event loop, with a short timeout, and cached briefly so a scraper or load balancer polling every second costs at
most one probe per interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from streams.metrics import CLICKHOUSE_UP

PROBE_TIMEOUT_SECONDS = 1.0
PROBE_CACHE_SECONDS = 2.0


class ClickHouseProbe:
    def __init__(
        self,
        ping: Callable[[], bool],
        *,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        cache_seconds: float = PROBE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ping = ping
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.clock = clock
        self.last: bool | None = None
        self.checked_at = float("-inf")
        self.lock = asyncio.Lock()

    @classmethod
    def of(cls, client: Client) -> ClickHouseProbe:
        return cls(lambda: client.ping(timeout=PROBE_TIMEOUT_SECONDS))

    async def reachable(self) -> bool:
        async with self.lock:  # callers arriving together share one probe
            if self.last is None or self.clock() - self.checked_at >= self.cache_seconds:
                self.last = await self._probe()
                self.checked_at = self.clock()
                CLICKHOUSE_UP.set(self.last)
            return self.last

    async def _probe(self) -> bool:
        try:
            return bool(await asyncio.wait_for(asyncio.to_thread(self.ping), self.timeout))
        except Exception:  # refused, timed out, or any driver error: not reachable
            return False


@dataclass(frozen=True)
class Readiness:
    checks: Mapping[str, bool]

    @property
    def ready(self) -> bool:
        return all(self.checks.values())

    @property
    def status(self) -> int:
        return 200 if self.ready else 503

    def body(self) -> dict[str, object]:
        return {"ready": self.ready, "checks": dict(self.checks)}


def metrics_text() -> tuple[bytes, str]:
    """The default registry in Prometheus text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


@dataclass
class RebalanceWatch:
    """Whether a rebalance is stuck: the worker rebalancing (rejoining its group, recovering its tables) with nothing
    advancing for `limit` seconds. Faust waits for both without a limit, so a worker stuck there would hold its
    partitions and apply nothing for ever; `observe` it periodically with whatever marks progress."""

    limit: float
    reported: bool = False
    """Set by the caller once it has reported the current episode."""
    _since: float | None = None
    _marker: Hashable = None

    def observe(self, now: float, rebalancing: bool, marker: Hashable) -> None:
        if not rebalancing:
            self._since, self.reported = None, False
        elif self._since is None or marker != self._marker:
            self._since, self._marker, self.reported = now, marker, False

    def stuck_for(self, now: float) -> float | None:
        """Seconds without progress when past `limit`, else None."""
        if self._since is None or now - self._since < self.limit:
            return None
        return now - self._since
