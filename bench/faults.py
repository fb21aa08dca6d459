"""Fault figures: what a SIGKILLed worker, a broker outage and an API outage lose or change, counted by id.

    PYTHONPATH=. .venv/bin/python -m bench.faults [--snapshots 9000] [--kills 3] [--outage-snapshots 12000]
        [--rate 300] [--outage-seconds 30] [--reporter-snapshots 80] [--api-outage-seconds 10]
        [--only sigkill|broker|api]

A local broker of the bench's own (`streams.local_kafka`, in a temporary folder) and, per scenario, fresh topics and
the real worker (`ctxbudget run`, every role, the sinks writing its embedded chdb) in a process of its own. The
simulator's traffic has no duplicate or late re-sends here, so every snapshot id is sent once and every copy of an
output under one id is a replay's; its timers are kept out (staleness and package expiry far away), as in the
recovery tests.

1. SIGKILL mid-drain: a backlog of `--snapshots` snapshots (with the fleet's session events and packages); the
   worker is SIGKILLed `--kills` times, each time once its group has committed another share of the snapshots, and
   restarted, then left to drain.
2. Broker outage under load: the worker drains `--outage-snapshots` snapshots (with their fleet's records) sent at
   `--rate` records a second while the broker is stopped for `--outage-seconds` and started again on its port; the
   producer sends again what the broker did not acknowledge.
3. API outage under a running reporter: `ctxbudget report --from codex-app-server --api-url` fed one usage line per
   thread (a thread's first snapshot goes out at once), `--reporter-snapshots` threads over about 20 s, while
   `ctxbudget api` is SIGKILLed for `--api-outage-seconds` and started again on its port.

Counted after each, once the worker's group has committed everything: the snapshot ids on `snapshots` (sent), with
a verdict on `snapshot-verdicts` and rows in ClickHouse's `thread_context_snapshot_inputs` (arrived); ids whose
copies differ (verdicts; `client-events` and `context-events` by event id); and the accepted snapshots against a
pure replay of the engine over the input topics as they hold them.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import logging
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from bench.engine_bench import _caught_up, conversations
from core.engine_config import EngineConfig
from core.settings import Settings
from core.topics import CLIENT_EVENTS, CONTEXT_EVENTS, HANDOFF_PACKAGES, SESSION_EVENTS, SNAPSHOT_VERDICTS, SNAPSHOTS
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.local_kafka import LocalKafka, free_port
from streams.simulator import SimRecord, SimulationConfig, generate
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import WorkerProcess, committed_offsets, committed_records, get_when_up

WORKER_ENV = {
    "CTXBUDGET_STALE_FACTOR": "100000",
    "CTXBUDGET_HANDOFF_TTL_SECONDS": "1e9",
    "CTXBUDGET_BATCH_SIZE": "200",
}
"""As the recovery tests run the worker: wall-clock timers out of the comparison, batches small enough that a kill
lands among many commits."""
ENGINE_CONFIG = EngineConfig(stale_factor=100000, handoff_ttl=timedelta(seconds=1e9))
ENGINE_INPUTS = (SNAPSHOTS, SESSION_EVENTS, HANDOFF_PACKAGES)
DRAIN_SECONDS = 900
IDENTITY = {"CTXBUDGET_NODE_ID": "mac-01", "CTXBUDGET_WORKER_ID": "worker-mac-01", "CTXBUDGET_PROJECT_ID": "proj-001"}


@dataclass(frozen=True)
class Logged:
    partition: int
    offset: int
    timestamp: datetime
    key: bytes | None
    value: bytes


async def read_topic(settings: Settings, topic: str) -> list[Logged]:
    """Every record of the (unprefixed) topic, partition by partition in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(settings.topic(topic), p) for p in range(settings.topic_partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[Logged] = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for tp, batch in (await consumer.getmany(timeout_ms=500)).items():
                records += [
                    Logged(tp.partition, m.offset, datetime.fromtimestamp(m.timestamp / 1000, UTC), m.key, m.value)
                    for m in batch
                    if m.offset < ends[tp]
                ]
        return records
    finally:
        await consumer.stop()


async def send_all(settings: Settings, records: Sequence[SimRecord], rate: float | None = None) -> int:
    """Send the records in order, at `rate` a second (None: at once), each until the broker acknowledges it: a record
    whose send failed (the broker away) is sent again once it answers. Returns how many were sent again."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True, acks="all")
    await producer.start()
    again = 0
    started = time.monotonic()
    try:
        pending: list[tuple[SimRecord, asyncio.Future[Any]]] = []
        for index, record in enumerate(records):
            if rate is not None:
                await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
            pending.append((record, await producer.send(settings.topic(record.topic), record.value, key=record.key)))
            if len(pending) >= 500 or index == len(records) - 1:
                while pending:
                    results = await asyncio.gather(*(future for _, future in pending), return_exceptions=True)
                    failed = [record for (record, _), result in zip(pending, results, strict=True)
                              if isinstance(result, Exception)]  # fmt: skip
                    again += len(failed)
                    if failed:
                        await asyncio.sleep(1)
                    pending = [(r, await producer.send(settings.topic(r.topic), r.value, key=r.key)) for r in failed]
    finally:
        await producer.stop()
    return again


def fleet(snapshots: int, seed: int) -> list[SimRecord]:
    """Simulator traffic with about `snapshots` snapshots, stamped near now, without duplicate or late re-sends."""
    threads = max(1, snapshots // 40)
    config = SimulationConfig(
        threads=threads,
        turns_per_thread=40,
        seed=seed,
        start=datetime.now(UTC) - timedelta(hours=1),
        turn_seconds=60,
        duplicate_rate=0,
        late_rate=0,
        invalid_rate=0,
    )
    records = list(generate(config))
    return conversations(records) + records


async def until(check: Callable[[], Any], what: str, within: float = DRAIN_SECONDS) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not {what} within {within} s")
        await asyncio.sleep(1)


async def drained(settings: Settings, worker: WorkerProcess) -> None:
    """Until the worker's group has committed every partition it reads to its end (every derived record sunk)."""

    async def check() -> bool:
        if not worker.alive():
            raise RuntimeError(f"the worker exited:\n{worker.describe()}")
        return await _caught_up(settings)

    await until(check, "drained")


# -- counting -------------------------------------------------------------------------------------------------------
async def count(settings: Settings, data_dir: Path, scenario: str, started: float) -> None:
    """Print what was sent and what arrived, by id, and the ids with more than one content."""
    inputs = {topic: await read_topic(settings, topic) for topic in ENGINE_INPUTS}
    sent = Counter(json.loads(r.value)["snapshot_id"] for r in inputs[SNAPSHOTS])
    verdicts: dict[str, set[str]] = defaultdict(set)
    for record in await read_topic(settings, SNAPSHOT_VERDICTS):
        verdict = json.loads(record.value)
        verdicts[verdict["snapshot"]["snapshot_id"]].add(verdict["verdict"])
    events = {topic: await read_topic(settings, topic) for topic in (CLIENT_EVENTS, CONTEXT_EVENTS)}
    rows = clickhouse_rows(data_dir)
    expected = reference(inputs)
    accepted = {s for s, seen in verdicts.items() if "accept" in seen}
    print(f"{scenario} ({time.monotonic() - started:.0f} s):")
    print(f"  snapshots sent                 {len(sent):7d} ids ({sum(n > 1 for n in sent.values())} sent twice)")
    print(f"  with a verdict                 {len(sent.keys() & verdicts.keys()):7d}"
          f"   missing {len(sent.keys() - verdicts.keys())}")  # fmt: skip
    print(f"  in ClickHouse (inputs)         {len(sent.keys() & rows.keys()):7d}"
          f"   missing {len(sent.keys() - rows.keys())}, rows {sum(rows.values())}")  # fmt: skip
    once = [s for s, n in sent.items() if n == 1]
    print(f"  ids with two verdicts          {sum(len(verdicts[s]) > 1 for s in once):7d}")
    print(f"  accepted unlike a pure replay  {len(accepted ^ expected):7d} of {len(expected)} accepted")
    for topic, records in events.items():
        contents: dict[str, set[bytes]] = defaultdict(set)
        for record in records:
            contents[json.loads(record.value)["event_id"]].add(record.value)
        copies = Counter(json.loads(r.value)["event_id"] for r in records)
        print(f"  {topic:15s} ids {len(contents):7d}   repeated {sum(n > 1 for n in copies.values())},"
              f" with differing copies {sum(len(c) > 1 for c in contents.values())}")  # fmt: skip


def reference(inputs: dict[str, list[Logged]]) -> set[str]:
    """The snapshot ids the pure engine accepts over the input topics as they hold them (each thread's records in
    their log order: a thread's records share a partition number on every input topic)."""
    logs = [
        [InputMessage(topic, r.partition, r.offset, r.key, r.value, r.timestamp) for r in records if r.partition == p]
        for topic, records in inputs.items()
        for p in {r.partition for r in records}
    ]
    # merged by time, each topic's partition kept in its offset order (a record sent again may be stamped earlier)
    messages = heapq.merge(*logs, key=lambda m: m.timestamp or datetime.now(UTC))
    result = process_batch(messages, {}.get, {}.get, datetime.now(UTC), ENGINE_CONFIG, "")
    return {e.record.snapshot.snapshot_id for e in result.emits if e.topic == SNAPSHOT_VERDICTS and e.record.accepted}


def clickhouse_rows(data_dir: Path) -> Counter[str]:
    """Rows per snapshot id in the stopped worker's `thread_context_snapshot_inputs` (read in a process of its own:
    chdb opens one data path per process)."""
    query = "SELECT snapshot_id, count() FROM thread_context_snapshot_inputs GROUP BY snapshot_id"
    script = (
        "import sys, json; from sinks.clickhouse import connect; "
        f"print(json.dumps(connect(sys.argv[1]).query({query!r}).result_rows))"
    )
    done = subprocess.run([sys.executable, "-c", script, f"chdb://{data_dir / 'clickhouse'}"],
                          capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    return Counter({snapshot_id: rows for snapshot_id, rows in json.loads(done.stdout)})


# -- scenarios ------------------------------------------------------------------------------------------------------
async def sigkill_mid_drain(settings: Settings, root: Path, snapshots: int, kills: int) -> None:
    started = time.monotonic()
    records = fleet(snapshots, seed=11)
    await ensure_topics(settings)
    await send_all(settings, records)
    total = sum(r.topic == SNAPSHOTS for r in records)
    data_dir = root / "sigkill"
    for kill in range(1, kills + 1):
        worker = WorkerProcess(settings, data_dir, **WORKER_ENV).start()
        share = total * kill // (kills + 1)

        async def committed(worker: WorkerProcess = worker, share: int = share) -> bool:
            if not worker.alive():
                raise RuntimeError(f"the worker exited:\n{worker.describe()}")
            return committed_records(await committed_offsets(settings), settings.topic(SNAPSHOTS)) >= share

        await until(committed, f"{share} snapshots committed")
        worker.kill()
        print(f"  SIGKILL {kill} after {share} of {total} snapshots committed ({time.monotonic() - started:.0f} s)")
    worker = WorkerProcess(settings, data_dir, **WORKER_ENV).start()
    try:
        await drained(settings, worker)
    finally:
        assert worker.stop() == 0, worker.describe()
    await count(settings, data_dir, f"SIGKILL mid-drain x{kills}", started)


async def broker_outage(settings: Settings, broker: LocalKafka, root: Path, snapshots: int, rate: float,
                        seconds: float) -> None:  # fmt: skip
    started = time.monotonic()
    records = fleet(snapshots, seed=12)
    await ensure_topics(settings)
    data_dir = root / "broker"
    worker = WorkerProcess(settings, data_dir, **WORKER_ENV).start()
    try:
        sending = asyncio.create_task(send_all(settings, records, rate))
        await asyncio.sleep(len(records) / rate / 3)
        down_at = time.monotonic()
        await asyncio.to_thread(broker.down)
        await asyncio.sleep(seconds)
        await asyncio.to_thread(broker.up, int(str(settings.kafka_bootstrap_servers).rsplit(":", 1)[1]))
        print(f"  broker away {time.monotonic() - down_at:.0f} s (stop to answering again)")
        again = await sending
        print(f"  records sent again by the producer: {again}")
        await drained(settings, worker)
    finally:
        assert worker.stop() == 0, worker.describe()
    await count(settings, data_dir, f"broker outage {seconds:g} s under load", started)


async def api_outage(settings: Settings, root: Path, threads: int, seconds: float) -> None:
    started = time.monotonic()
    await ensure_topics(settings)
    data_dir, api_dir = root / "api-worker", root / "api"
    port = free_port()
    api_env = {"CTXBUDGET_API_PORT": str(port)}
    secret = token_secret(replace_data_dir(settings, api_dir), ApiSettings())
    token = issue_token(secret, Role.WORKER, "worker-mac-01", ["proj-001"], ttl=timedelta(hours=1))
    worker = WorkerProcess(settings, data_dir, **WORKER_ENV).start()
    api = WorkerProcess(settings, api_dir, module="streams api", **api_env).start()
    pace = 20 / threads
    feed = (
        "import json, sys, time\n"
        f"for i in range({threads}):\n"
        "    usage = {'totalTokens': 20000 + 1000 * (i % 200)}\n"
        "    params = {'threadId': f'thr_fault_{i:04d}', 'turnId': 'u1',\n"
        "              'tokenUsage': {'total': usage, 'last': usage, 'modelContextWindow': 258400}}\n"
        "    print(json.dumps({'method': 'thread/tokenUsage/updated', 'params': params}), flush=True)\n"
        f"    time.sleep({pace})\n"
        f"time.sleep({seconds + 30})\n"  # the input stays open until the API is back and the spool delivered
    )
    reporter_env = {**api.env, **IDENTITY, "CTXBUDGET_WORKER_STATE_DIR": str(root / "reporter-state")}
    script = root / "feed.py"
    script.write_text(feed)
    command = [str(Path(sys.executable).parent / "ctxbudget"), "report", "--from", "codex-app-server",
               "--exec", f"{sys.executable} {script}", "--api-url", f"http://127.0.0.1:{port}",
               "--token", token]  # fmt: skip
    try:
        await asyncio.to_thread(get_when_up, f"http://127.0.0.1:{port}/healthz", 180, api.alive)
        with (root / "reporter.log").open("wb") as log:
            reporter = subprocess.Popen(command, env=reporter_env, stdout=log, stderr=subprocess.STDOUT)  # noqa: ASYNC220
        await asyncio.sleep(20 / 3)
        api.kill()
        await asyncio.sleep(seconds)
        api.start()
        await asyncio.to_thread(get_when_up, f"http://127.0.0.1:{port}/healthz", 180, api.alive)
        print(f"  API away {seconds:g} s (SIGKILL to restarted)")
        code = await asyncio.to_thread(reporter.wait, 300)
        summary = [line for line in (root / "reporter.log").read_text().splitlines() if "delivered " in line]
        print(f"  reporter exited {code}: {summary[-1] if summary else '(no summary)'}")
        await drained(settings, worker)
    finally:
        api.stop()
        assert worker.stop() == 0, worker.describe()
    await count(settings, data_dir, f"API outage {seconds:g} s under a running reporter", started)


def replace_data_dir(settings: Settings, data_dir: Path) -> Settings:
    return settings.model_copy(update={"data_dir": data_dir})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshots", type=int, default=9000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--outage-snapshots", type=int, default=12000)
    parser.add_argument("--rate", type=float, default=300, help="records a second (snapshots and the fleet's others)")
    parser.add_argument("--outage-seconds", type=float, default=30)
    parser.add_argument("--reporter-snapshots", type=int, default=80)
    parser.add_argument("--api-outage-seconds", type=float, default=10)
    parser.add_argument("--only", choices=("sigkill", "broker", "api"))
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # a fresh topic's or an away broker's retries
    root = Path(tempfile.mkdtemp(prefix="faults-"))
    defaults = Settings()
    broker = LocalKafka(root / "kafka", defaults.kafka_version, defaults.kafka_cache_dir)
    bootstrap = broker.up()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, local broker {bootstrap}, state in {root}")

    def fresh(name: str) -> Settings:
        return Settings(kafka_bootstrap_servers=bootstrap, data_dir=root / name, topic_partitions=2,
                        topic_prefix=f"f{uuid.uuid4().hex[:6]}.", app_id=f"faults-{uuid.uuid4().hex[:6]}")  # fmt: skip

    try:
        if args.only in (None, "sigkill"):
            asyncio.run(sigkill_mid_drain(fresh("sigkill"), root, args.snapshots, args.kills))
        if args.only in (None, "broker"):
            asyncio.run(broker_outage(fresh("broker"), broker, root, args.outage_snapshots, args.rate,
                                      args.outage_seconds))  # fmt: skip
        if args.only in (None, "api"):
            asyncio.run(api_outage(fresh("api"), root, args.reporter_snapshots, args.api_outage_seconds))
    finally:
        broker.destroy()


if __name__ == "__main__":
    main()
