"""API benchmark (figures, not a test): conversation-list latency over 10,000 conversations, and 5.2 ingest rate.

    .venv/bin/python -m bench.api_bench [--bootstrap HOST:PORT]

The list runs on embedded chdb in a temporary folder. Ingest runs the app under uvicorn with a load generator in the
same process (raw keep-alive HTTP/1.1 connections: httpx's pool costs more CPU than the server, so the figure is a
floor); with --bootstrap it publishes to that Kafka for real, otherwise to a publisher that only counts, which
isolates the HTTP + auth + validation cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from api.app import create_app
from api.policies import PolicyBook
from api.server import running
from api.services import KafkaServices, kafka_services
from api.settings import ApiSettings
from api.tokens import Role, issue_token
from bench.measure import percentile
from schemas import ContextBudgetIndicator, ConversationItem
from sinks.batcher import Batcher
from sinks.clickhouse import connect
from sinks.migrations import migrate
from sinks.tables import ROUTES
from sinks.writer import write_batch
from streams.settings import Settings
from streams.topics import ensure_topics
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


async def timed(client: httpx.AsyncClient, requests: int, concurrency: int, send) -> tuple[float, list[float]]:
    latencies: list[float] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for i in queue:
            start = time.perf_counter()
            answer = await send(client, i)
            latencies.append(time.perf_counter() - start)
            answer.raise_for_status()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start, latencies


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
    settings = Settings(
        data_dir=folder, kafka_bootstrap_servers=bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:6]}."
    )
    api = ApiSettings()
    client = connect(f"chdb://{folder / 'db'}")
    migrate(client)
    seed_conversations(client, 10_000)
    counting = CountingPublisher()

    @contextlib.asynccontextmanager
    async def offline() -> AsyncIterator[KafkaServices]:
        from api.events import Broadcaster

        yield KafkaServices(counting, PolicyBook(), Broadcaster("unused", "unused", 1))

    if bootstrap:
        await ensure_topics(settings)
    services = (lambda: kafka_services(settings, api)) if bootstrap else offline
    app = create_app(settings, client, api, services=services, secret=SECRET)
    operator = issue_token(SECRET, Role.OPERATOR, "bench", ttl=timedelta(hours=1))
    body = dumps(SPEC_REPORT_REQUEST)
    async with (
        running(app, "127.0.0.1", 0) as base_url,
        httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {operator}"}, limits=httpx.Limits(max_connections=100)
        ) as http,
    ):

        async def list_page(c: httpx.AsyncClient, i: int) -> httpx.Response:
            return await c.get("/api/v1/conversations", params={"limit": 50})

        await timed(http, 50, 4, list_page)  # warm-up
        seconds, latencies = await timed(http, 500, 4, list_page)
        print(
            f"list (10,000 conversations, page 50, 4 concurrent): {500 / seconds:,.0f} req/s, "
            f"p50 {percentile(latencies, 50) * 1000:.1f} ms, p99 {percentile(latencies, 99) * 1000:.1f} ms"
        )
        request = (
            b"POST /api/v1/workers/worker-mac-01/thread-context HTTP/1.1\r\nHost: bench\r\n"
            b"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (operator.encode(), len(body), body)
        )
        await raw_load(base_url, request, 200, concurrency)
        seconds, latencies = await raw_load(base_url, request, requests, concurrency)
        target = f"Kafka at {bootstrap}" if bootstrap else "a counting publisher (no Kafka)"
        print(
            f"ingest to {target}, {concurrency} concurrent: {requests / seconds:,.0f} req/s, "
            f"p50 {percentile(latencies, 50) * 1000:.1f} ms, p99 {percentile(latencies, 99) * 1000:.1f} ms"
        )
    client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="Kafka to publish to (default: count only)")
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=64)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.bootstrap, arguments.requests, arguments.concurrency))
