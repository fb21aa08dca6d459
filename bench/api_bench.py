"""API benchmark (figures, not a test): conversation-list latency over 10,000 conversations, and 5.2 ingest rate.

    .venv/bin/python -m bench.api_bench [--bootstrap HOST:PORT]

The list runs on embedded chdb in a temporary folder. Both run the app under uvicorn with a load generator in the
same process over raw keep-alive HTTP/1.1 connections: httpx's pool costs more CPU than the server (with it, the
list's p99 measured the client: 90 ms against 24 ms). With --bootstrap ingest publishes to that Kafka for real,
otherwise to a publisher that only counts, which isolates the HTTP + auth + validation cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.app import create_app
from api.cli import operator_token
from api.policies import PolicyBook
from api.server import running
from api.services import KafkaServices
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.tokens import Role, issue_token
from bench.measure import api_process, child_cpu_seconds, percentile
from core.settings import Settings
from schemas import ContextBudgetIndicator, ConversationItem
from sinks.batcher import Batcher
from sinks.clickhouse import connect
from sinks.migrations import migrate
from sinks.tables import ROUTES
from sinks.writer import write_batch
from tests.samples import SPEC_REPORT_REQUEST, dumps

SECRET = b"bench-secret-bench-secret-bench-secret"


class CountingPublisher:
    def __init__(self) -> None:
        self.count = 0

    async def publish(self, topic: str, key: bytes, value: bytes) -> None:
        self.count += 1


def seed_conversations(client, n: int) -> None:
    t0 = datetime(2026, 3, 25, tzinfo=UTC)
    items = [
        ConversationItem(
            conversation_id=f"conv-{i}",
            conversation_type="single_device",
            project_id=f"proj-{i % 50}",
            project_title="bench",
            manual_pinned=i % 97 == 0,
            latest_reply_at=t0 + timedelta(seconds=i),
            context_budget_indicator=ContextBudgetIndicator(visible=True, percent=i % 100, level="watch"),
        )
        for i in range(n)
    ]
    batcher = Batcher(ROUTES["conversation-indicators"], f"bench-{uuid.uuid4().hex[:6]}", 0, max_rows=n + 1)
    for offset, item in enumerate(items):
        batcher.add(offset, item)
    for flush in batcher.flush():
        for batch in flush.batches:
            write_batch(client, batch.table, batch.rows, batch.token)


async def raw_load(base_url: str, request: bytes, requests: int, connections: int) -> tuple[float, list[float]]:
    """`requests` copies of one raw HTTP request over `connections` keep-alive connections; 200s only."""
    host, port = base_url.removeprefix("http://").split(":")
    latencies: list[float] = []
    remaining = iter(range(requests))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for _ in remaining:
                start = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(head.decode(errors="replace"))
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - start)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    return time.perf_counter() - start, latencies


async def main(bootstrap: str | None, requests: int, concurrency: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="api-bench-"))
    settings = Settings(data_dir=folder, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
    client = connect(f"chdb://{folder / 'db'}")
    migrate(client)
    seed_conversations(client, 10_000)
    counting = CountingPublisher()

    @contextlib.asynccontextmanager
    async def offline() -> AsyncIterator[KafkaServices]:
        from api.events import Broadcaster

        yield KafkaServices(counting, PolicyBook(), Broadcaster("unused", "unused", 1), ThreadBook())

    app = create_app(settings, client, ApiSettings(), services=offline, secret=SECRET)
    operator = issue_token(SECRET, Role.OPERATOR, "bench", ttl=timedelta(hours=1))
    async with running(app, "127.0.0.1", 0) as base_url:
        gc.freeze()  # as `api.server.serve` does once started
        listing = b"GET /api/v1/conversations?limit=50 HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n\r\n" % (
            operator.encode()
        )
        await raw_load(base_url, listing, 50, 4)  # warm-up
        seconds, latencies = await raw_load(base_url, listing, 500, 4)
        report("list (10,000 conversations, page 50, 4 concurrent)", 500, seconds, latencies)
        await raw_load(base_url, ingest_request(operator), 200, concurrency)
        cpu = time.process_time()
        seconds, latencies = await raw_load(base_url, ingest_request(operator), requests, concurrency)
        report(f"ingest to a counting publisher (no Kafka, same process), {concurrency} concurrent", requests, seconds,
               latencies, ("server and load generator", time.process_time() - cpu))  # fmt: skip
    client.close()
    if bootstrap:
        await ingest_on_its_own_process(bootstrap, requests, concurrency)


async def ingest_on_its_own_process(bootstrap: str, requests: int, concurrency: int) -> None:
    """`ctxbudget api` in a process of its own, publishing to Kafka; the load generator here."""
    folder = Path(tempfile.mkdtemp(prefix="api-bench-"))
    settings = Settings(
        data_dir=folder, kafka_bootstrap_servers=bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:6]}."
    )
    async with api_process(settings) as base_url:
        request = ingest_request(operator_token(settings))
        await raw_load(base_url, request, 500, concurrency)
        cpu = child_cpu_seconds()
        seconds, latencies = await raw_load(base_url, request, requests, concurrency)
        report(f"ingest to Kafka at {bootstrap} (`ctxbudget api` on its own), {concurrency} concurrent", requests,
               seconds, latencies, ("`ctxbudget api`", child_cpu_seconds() - cpu))  # fmt: skip


def ingest_request(token: str) -> bytes:
    body = dumps(SPEC_REPORT_REQUEST)
    return (
        b"POST /api/v1/workers/worker-mac-01/thread-context HTTP/1.1\r\nHost: bench\r\n"
        b"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (token.encode(), len(body), body)
    )


def report(
    what: str, requests: int, seconds: float, latencies: list[float], cpu: tuple[str, float] | None = None
) -> None:
    """The rate and latency, and the CPU seconds of `cpu`'s process per request: a figure a shared machine disturbs
    much less than the rate."""
    p50, p99 = (percentile(latencies, q) * 1000 for q in (50, 99))
    per_request = "" if cpu is None else f", CPU of {cpu[0]} {cpu[1] / requests * 1e6:.0f} us per request"
    print(f"{what}: {requests / seconds:,.0f} req/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms{per_request}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="Kafka to publish to (default: count only)")
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=64)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.bootstrap, arguments.requests, arguments.concurrency))
