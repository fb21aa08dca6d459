"""SSE fan-out benchmark (figures, not a test): one API process, many connected clients, event -> delivery latency.

    .venv/bin/python -m bench.sse_bench --bootstrap HOST:PORT [--clients 1000] [--events 200] [--rate 20]

`ctxbudget api` runs in a process of its own (its own embedded chdb), so the clients here do not share its CPU; they
are raw keep-alive connections reading `GET /api/v1/events` with an operator token. Once every client is subscribed,
`--events` client events go to `client-events` at `--rate` per second; each client notes when each event reaches it.
Printed: deliveries, and p50/p99/max from the produce call to the client reading the event, against the baseline of
the same events read by one plain aiokafka consumer (what any fan-out adds on top of Kafka itself).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from api.cli import operator_token
from api.server import raised_fd_limit
from bench.measure import api_process, child_cpu_seconds, percentile
from core.settings import Settings
from schemas import ContextBudgetIndicator, ConversationContextIndicatorUpdated
from schemas.codec import encode_record
from streams.topic_admin import ensure_topics

EVENT_ID = b'"event_id":"'


class Tally:
    """Per event id, when each client read it; `subscribed` once every client is in, `complete` once every event
    reached every client."""

    def __init__(self, clients: int, events: int) -> None:
        self.arrivals: dict[str, list[float]] = {}
        self.clients, self.expected = clients, clients * events
        self.connected = self.delivered = 0
        self.subscribed, self.complete = asyncio.Event(), asyncio.Event()

    def joined(self) -> None:
        self.connected += 1
        if self.connected == self.clients:
            self.subscribed.set()

    def arrived(self, event_id: str) -> None:
        self.arrivals.setdefault(event_id, []).append(time.perf_counter())
        self.delivered += 1
        if self.delivered == self.expected:
            self.complete.set()


async def client(url: str, token: str, tally: Tally) -> None:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
    writer.write(f"GET /api/v1/events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"SSE refused: {status!r}")
    tally.joined()
    with contextlib.suppress(asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
        while True:  # a frame at a time, its id picked out without a JSON parse: the clients' CPU is not measured
            chunk = await reader.readuntil(b"\n\n")
            for start in _event_ids(chunk):
                tally.arrived(chunk[start : chunk.index(b'"', start)].decode())
    writer.close()


def _event_ids(chunk: bytes) -> Iterator[int]:
    """Where each `"event_id":"` value starts in the chunk."""
    start = chunk.find(EVENT_ID)
    while start >= 0:
        yield start + len(EVENT_ID)
        start = chunk.find(EVENT_ID, start + len(EVENT_ID))


def event(n: int, run: str) -> ConversationContextIndicatorUpdated:
    return ConversationContextIndicatorUpdated(
        event_id=f"{run}-{n}",
        occurred_at=datetime.now(UTC),
        project_id="bench",
        conversation_id=f"conv-{n % 50}",
        context_budget_indicator=ContextBudgetIndicator(visible=True, percent=n % 100, level="safe"),
    )


async def baseline(settings: Settings, run: str, arrivals: dict[str, list[float]]) -> None:
    consumer = AIOKafkaConsumer(settings.topic("client-events"), bootstrap_servers=settings.kafka_bootstrap_servers,
                                auto_offset_reset="latest")  # fmt: skip
    await consumer.start()
    try:
        await consumer.seek_to_end()
        while True:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                now = time.perf_counter()
                for record in records:
                    event_id = json.loads(record.value)["event_id"]
                    if event_id.startswith(run):
                        arrivals.setdefault(event_id, []).append(now)
    finally:
        await consumer.stop()


async def main(bootstrap: str, clients: int, events: int, rate: float) -> None:
    if raised_fd_limit() < clients + 64:  # the clients' sockets are this process's descriptors too
        raise SystemExit(f"{clients} clients need more descriptors than this process may open (ulimit -n)")
    folder = Path(tempfile.mkdtemp(prefix="sse-bench-"))
    settings = Settings(data_dir=folder, kafka_bootstrap_servers=bootstrap, topic_prefix=f"sse{uuid.uuid4().hex[:6]}.")
    await ensure_topics(settings)
    async with api_process(settings) as url:
        token = operator_token(settings)
        run = uuid.uuid4().hex[:6]
        tally = Tally(clients, events)
        direct: dict[str, list[float]] = {}
        readers = [asyncio.create_task(client(url, token, tally)) for _ in range(clients)]
        await asyncio.wait_for(tally.subscribed.wait(), timeout=120)
        watcher = asyncio.create_task(baseline(settings, run, direct))
        await asyncio.sleep(2)  # the baseline consumer's assignment
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        await producer.start()
        sent: dict[str, float] = {}
        cpu = (child_cpu_seconds(), time.process_time())
        start = time.perf_counter()
        for n in range(events):
            await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            record = event(n, run)
            sent[record.event_id] = time.perf_counter()
            await producer.send_and_wait(settings.topic("client-events"), encode_record(record), key=b"bench")
        await producer.stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tally.complete.wait(), timeout=30)
        server_cpu, clients_cpu = child_cpu_seconds() - cpu[0], time.process_time() - cpu[1]
        for task in [*readers, watcher]:
            task.cancel()
        await asyncio.gather(*readers, watcher, return_exceptions=True)
    fanned = [t - sent[e] for e, times in tally.arrivals.items() if e in sent for t in times]
    plain = [t - sent[e] for e, times in direct.items() if e in sent for t in times]
    print(f"SSE fan-out: {clients} clients, {events} events at {rate:.0f}/s, "
          f"{len(fanned)} of {clients * events} deliveries")  # fmt: skip
    for name, values in (("one aiokafka consumer (baseline)", plain), (f"{clients} SSE clients", fanned)):
        if values:
            p50, p99, worst = (v * 1000 for v in (percentile(values, 50), percentile(values, 99), max(values)))
            print(f"  {name:34s} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  max {worst:7.1f} ms")
    per_delivery = server_cpu / max(1, len(fanned)) * 1e6
    print(f"  CPU from the first event to the last delivery: `ctxbudget api` {server_cpu:.2f} s "
          f"({per_delivery:.1f} us per delivery), the clients' process {clients_cpu:.2f} s")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="Kafka the API reads client-events from")
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.bootstrap, arguments.clients, arguments.events, arguments.rate))
