"""Health checks shared by the worker and the API: liveness is "the process answers"; readiness is a set of named
checks that must all pass (`/readyz` answers 503 with the failing ones otherwise).

ClickHouse reachability is probed with clickhouse-connect's `ping` (GET /ping on a server, in-process for chdb), off
the event loop; Kafka's by opening a TCP connection to a bootstrap address (a stopped broker refuses it at once,
and the Kafka clients keep no usable state to ask: they retry forever). Both with a short timeout, and cached briefly
so a scraper or load balancer polling every second costs at most one probe per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from core.logs import KAFKA_OUTAGE

PROBE_TIMEOUT_SECONDS = 1.0
PROBE_CACHE_SECONDS = 2.0
WATCH_SECONDS = 1.0
"""How often a process probes Kafka on its own, so an outage's first and last log lines come when it happens."""
CLICKHOUSE_UP = Gauge("ctxbudget_clickhouse_up", "1 when ClickHouse answered the last readiness probe, else 0.")
FAILING_AFTER = 3
"""Failed batches in a row after which an agent counts as failing (one can be a broker's blip)."""
FAILED_IN_A_ROW = Gauge(
    "ctxbudget_batches_failed_in_a_row", "Batches an agent failed to apply since it last applied one.", ["agent"]
)


class Pingable(Protocol):
    """A ClickHouse client as the probe uses it (clickhouse-connect's `Client`), so this module needs no driver."""

    def ping(self, timeout: float | None = None) -> bool: ...


class _CachedProbe:
    """A reachability check shared by callers arriving together and reused for `cache_seconds`."""

    def __init__(self, *, timeout: float, cache_seconds: float, clock: Callable[[], float]) -> None:
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.clock = clock
        self.last: bool | None = None
        self.checked_at = float("-inf")
        self.lock = asyncio.Lock()

    async def reachable(self) -> bool:
        async with self.lock:  # callers arriving together share one probe
            if self.last is None or self.clock() - self.checked_at >= self.cache_seconds:
                self.last = await self._probe()
                self.checked_at = self.clock()
                self._observed(self.last)
            return self.last

    async def _probe(self) -> bool:
        raise NotImplementedError

    def _observed(self, up: bool) -> None:
        """What the process does with a fresh result besides answering."""


class ClickHouseProbe(_CachedProbe):
    def __init__(
        self,
        ping: Callable[[], bool],
        *,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        cache_seconds: float = PROBE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(timeout=timeout, cache_seconds=cache_seconds, clock=clock)
        self.ping = ping

    @classmethod
    def of(cls, client: Pingable) -> ClickHouseProbe:
        return cls(lambda: client.ping(timeout=PROBE_TIMEOUT_SECONDS))

    async def _probe(self) -> bool:
        try:
            async with asyncio.timeout(self.timeout):
                return bool(await asyncio.to_thread(self.ping))
        except Exception:  # refused, timed out, or any driver error: not reachable
            return False

    def _observed(self, up: bool) -> None:
        CLICKHOUSE_UP.set(up)


class KafkaProbe(_CachedProbe):
    """Reachable when any bootstrap address accepts a connection; each result also tells the log's outage filter."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        cache_seconds: float = PROBE_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(timeout=timeout, cache_seconds=cache_seconds, clock=clock)
        self.addresses = [server.strip().rpartition(":") for server in bootstrap_servers.split(",") if server.strip()]

    async def _probe(self) -> bool:
        for host, _, port in self.addresses:
            try:
                async with asyncio.timeout(self.timeout):
                    _, writer = await asyncio.open_connection(host, int(port))
            except (OSError, TimeoutError, ValueError):
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True
        return False

    def _observed(self, up: bool) -> None:
        KAFKA_OUTAGE.reachable(up)

    async def watch(self, interval: float = WATCH_SECONDS) -> None:
        """Probe every `interval` until cancelled (readiness answers from the latest result)."""
        while True:
            await self.reachable()
            await asyncio.sleep(interval)


@dataclass
class FailingAgents:
    """Each agent's batches failed in a row, and the last failure. A failed batch is read again from the committed
    offset, so an agent whose batch fails every time moves nothing while the process looks alive: readiness says so
    (`failing`), with why."""

    after: int = FAILING_AFTER
    _failures: dict[str, tuple[int, str]] = field(default_factory=dict)

    def failed(self, agent: str, error: BaseException) -> None:
        count = self._failures.get(agent, (0, ""))[0] + 1
        self._failures[agent] = (count, f"{type(error).__name__}: {error}"[:500])
        FAILED_IN_A_ROW.labels(agent).set(count)

    def applied(self, agent: str) -> None:
        if self._failures.pop(agent, None) is not None:
            FAILED_IN_A_ROW.labels(agent).set(0)

    def failing(self) -> dict[str, str]:
        """The agents failing now, each with its count and last error."""
        return {
            agent: f"{count} batches failed in a row, last: {error}"
            for agent, (count, error) in self._failures.items()
            if count >= self.after
        }


@dataclass(frozen=True)
class Readiness:
    checks: Mapping[str, bool]
    failing: Mapping[str, str] = field(default_factory=dict)
    """Agents whose batches keep failing, with why (`FailingAgents.failing`): the check `agents_applying` fails."""

    @property
    def ready(self) -> bool:
        return all(self.checks.values())

    @property
    def status(self) -> int:
        return 200 if self.ready else 503

    def body(self) -> dict[str, object]:
        body: dict[str, object] = {"ready": self.ready, "checks": dict(self.checks)}
        if self.failing:
            body["failing"] = dict(self.failing)
        return body


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
