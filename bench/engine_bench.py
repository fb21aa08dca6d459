"""Worker throughput, printed as figures with baselines measured in the same run (machines here are noisy).

    .venv/bin/python -m bench.engine_bench [--threads 200] [--turns 60] [--projects 3] [--bootstrap HOST:PORT]
                                           [--aggregates | --live SPEED [--layout split|one]]
    .venv/bin/python -m bench.engine_bench --against DIR [--rounds 3] [--repeat 3]
                                           [--threads 10000] [--turns 2] [--projects 1000]

1. In process: the pure batch function as a worker runs it (decode, fold, output building, then every output and
   changed slot encoded; slots kept decoded between batches, as the runtime's cache keeps them) against the baseline
   of only decoding the same records with the schema codecs; then again with a worker's collector thresholds.
2. On a broker (`--bootstrap`, or the local one from `ctxbudget kafka up`): one worker process (`ctxbudget run`: engine,
   projection, aggregates, sinks into embedded chdb, API) draining a backlog of simulator traffic, against the raw
   aiokafka consume-and-produce ceiling on the same broker and records. From the worker's own metrics over the drain:
   records/s each agent applied (the projection's are session events and thread states), and rows/s and rows per
   insert of each ClickHouse table the sinks wrote.
3. On the same worker, at a steady paced rate: end-to-end latency from producing a snapshot to its `thread-state`
   record arriving at a consumer, p50 and p99; and, meanwhile, from producing a snapshot to the API reading it from
   `thread_context_latest` (what the BFF shows).
4. The same backlog on fresh topics for other layouts (`CTXBUDGET_ROLES`): a worker that runs only the engine (against
   the Faust agent that only acknowledges, over the same backlog), then one that runs only the aggregates over what
   that engine wrote (do they keep up with it? `--aggregates` runs only this pair); two engine workers sharing the
   partitions; two workers side by side, engine and projection in one, aggregates and sinks in the other.

5. `--live SPEED` instead: the engine and the aggregates in two processes fed the simulator's records at the fleet's
   own pace (each thread reports once a turn, `turn_seconds` apart), times SPEED: whether each keeps up with a live
   fleet of that size, by its lag while fed and how soon after the last record it had committed everything.
   `--layout one`: one worker with every role (engine, projection, aggregates, sinks) instead of the two processes.

`--against DIR` instead: only the batch function of part 1, this checkout's against another's (a worktree of the
base, say), each run in a process of its own importing its checkout's code, the two alternating in every round, with
a worker's collector thresholds and with CPython's: records/s and records per CPU second of each with their ratio,
each the best of `--repeat` runs in its process (the one least disturbed by other jobs), and whether both wrote
byte-identical outputs (a hash of every encoded output and slot; the exit status is 1 if not). Both fold the same
records on a fixed clock: each record stamped with its arrival at the fleet's pace.

Every backlog also registers the conversations that show the simulated threads: one single_device per thread and one
group per project, so the indicator fold has its production work.

A drain is timed from the first record the worker applied (its metrics, polled every 0.2 s) until its group has
committed every input partition to its end; "every derived record sunk" until every group has committed every
partition it reads.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

from api.cli import operator_token
from bench.measure import percentile
from core.engine_config import EngineConfig
from core.levels import classify_level
from core.settings import Settings
from core.topics import CONVERSATION_LINKS
from schemas import Codec, Conversation, ConversationType, SourceKind, ThreadContextSnapshot
from schemas.codec import encode_record
from schemas.projects import ConversationLink
from streams.aggregates.indicators import shown_thread_id
from streams.batching import InputMessage
from streams.engine.batch import SNAPSHOT_CODEC, _decode, process_batch
from streams.engine.fold import ThreadSlot
from streams.local_kafka import free_port
from streams.runtime.app import GC_THRESHOLDS
from streams.simulator import SimRecord, SimulationConfig, generate, produce
from streams.topic_admin import ensure_topics

BATCH = 2000
CONVERSATION_CODEC = Codec(Conversation)
LATENCY_RATE = 500.0
LATENCY_SECONDS = 10.0


def in_process(records: list[SimRecord], fleet: SimulationConfig) -> None:
    messages = timed_messages(records, fleet)
    started = time.perf_counter()
    for message in messages:
        with contextlib.suppress(ValueError):
            _decode(message)
    decode_only = len(messages) / (time.perf_counter() - started)

    default = _batch_function(messages)
    with _collector(GC_THRESHOLDS):
        tuned = _batch_function(messages).rate
    engine = default.rate
    print(f"in-process: {len(messages)} records, {default.outputs} outputs")
    print(f"  decode only (baseline)     {decode_only:10.0f} records/s")
    print(f"  engine batch function      {engine:10.0f} records/s  ({engine / decode_only:.2f}x of decode only;"
          f" Python's default collector thresholds)")  # fmt: skip
    print(f"  ... a worker's (collect_less) {tuned:7.0f} records/s  ({tuned / engine:.2f}x of the default's)")


def timed_messages(records: list[SimRecord], fleet: SimulationConfig) -> list[InputMessage]:
    """The records as the log holds them, each stamped with its arrival at the fleet's own pace: a fixed clock, so
    every run folds the same inputs at the same instants and writes the same outputs."""
    step = timedelta(seconds=fleet.turns_per_thread * fleet.turn_seconds) / max(len(records), 1)
    return [InputMessage(r.topic, 0, i, r.key, r.value, fleet.start + i * step) for i, r in enumerate(records)]


@dataclass(frozen=True)
class BatchRun:
    rate: float
    """Records per second."""
    cpu_rate: float
    """Records per CPU second of the process (the machine is shared: the wall clock counts other jobs' time too)."""
    outputs: int
    digest: str
    """SHA-256 of every output's topic, key and bytes and every changed slot's bytes, in order."""


def _batch_function(messages: list[InputMessage]) -> BatchRun:
    """The engine's batch function over the messages, each batch's outputs and changed slots encoded as the runtime
    publishes them, each batch applied at its last record's time."""
    slots: dict[str, ThreadSlot] = {}
    config = EngineConfig()
    digest = hashlib.sha256()
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    outputs = 0
    for start in range(0, len(messages), BATCH):
        batch = messages[start : start + BATCH]
        result = process_batch(batch, slots.get, {}.get, batch[-1].timestamp or datetime.now(UTC), config, "")
        for emit in result.emits:
            digest.update(f"{emit.topic}\0{emit.key}\0".encode())
            digest.update(encode_record(emit.record))
        for thread_id, slot in result.states.items():
            digest.update(encode_record(slot))
            slots[thread_id] = slot
        outputs += len(result.emits)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return BatchRun(len(messages) / wall, len(messages) / cpu, outputs, digest.hexdigest())


@contextlib.contextmanager
def _collector(thresholds: tuple[int, int, int]) -> Iterator[None]:
    default = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*default)


COLLECTORS = {"worker": GC_THRESHOLDS, "default": (700, 10, 10)}
"""`--against` runs the batch function with a worker's collector thresholds (`collect_less`) and with CPython's."""


def against(records: list[SimRecord], fleet: SimulationConfig, other: Path, rounds: int, repeat: int) -> bool:
    """This checkout's batch function against `other`'s (another worktree) over the same timed messages, each run in a
    process of its own with that checkout first on the path, the two alternating (which goes first swaps each
    round); whether every pair wrote the same outputs."""
    messages = timed_messages(records, fleet)
    checkouts = {"branch": Path(__file__).resolve().parents[1], "base": other.resolve()}
    same = True
    print(f"against {checkouts['base']}: {len(messages)} records, {fleet.threads} threads in {fleet.projects} "
          f"projects; records/s and records per CPU second, branch | base, each the best of {repeat} in its"
          " process")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "messages.pickle"
        inputs.write_bytes(pickle.dumps([(m.topic, m.key, m.value, m.timestamp) for m in messages]))
        for round_ in range(1, rounds + 1):
            for collector in COLLECTORS:
                order = list(checkouts.items())[:: 1 if round_ % 2 else -1]
                runs = {name: _run_in(checkout, inputs, collector, repeat) for name, checkout in order}
                branch, base = runs["branch"], runs["base"]
                identical = branch["digest"] == base["digest"] and branch["outputs"] == base["outputs"]
                same = same and identical
                print(f"  round {round_} {collector:7s} GC  {branch['rate']:7.0f} | {base['rate']:7.0f} records/s"
                      f" ({branch['rate'] / base['rate']:.2f}x)  {branch['cpu_rate']:7.0f} | {base['cpu_rate']:7.0f}"
                      f" per CPU s ({branch['cpu_rate'] / base['cpu_rate']:.2f}x)  {branch['outputs']} outputs"
                      f" {'byte-identical' if identical else 'DIFFER'}")  # fmt: skip
    return same


def _run_in(checkout: Path, inputs: Path, collector: str, repeat: int) -> dict:
    """`--run-batch` in a process importing `checkout`'s code (this file runs there, its imports resolve there)."""
    args = [sys.executable, str(Path(__file__).resolve()), "--run-batch", str(inputs), "--collector", collector,
            "--repeat", str(repeat)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(args, cwd=checkout, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the batch function in {checkout} failed:\n{done.stderr}")
    run = json.loads(done.stdout.splitlines()[-1])
    if not Path(run["code"]).is_relative_to(checkout):
        raise RuntimeError(f"{checkout}'s run imported {run['code']}")
    return run


def run_batch(inputs: Path, collector: str, repeat: int) -> None:
    """One `--against` run: the batch function over the pickled messages `repeat` times, each from no slots, the best
    rates (the least disturbed by other jobs) as a JSON line."""
    messages = [InputMessage(topic, 0, i, key, value, at)
                for i, (topic, key, value, at) in enumerate(pickle.loads(inputs.read_bytes()))]  # fmt: skip
    with _collector(COLLECTORS[collector]):
        runs = [_batch_function(messages) for _ in range(repeat)]
    if len({run.digest for run in runs}) != 1:
        raise RuntimeError("the same messages folded twice wrote different outputs")
    best = replace(runs[0], rate=max(r.rate for r in runs), cpu_rate=max(r.cpu_rate for r in runs))
    print(json.dumps({**asdict(best), "code": process_batch.__code__.co_filename}))


def conversations(records: list[SimRecord]) -> list[SimRecord]:
    """The home list of the simulated fleet: a single_device conversation per thread and a group one per project,
    as the aggregates' indicator fold would see them in production."""
    projects: dict[str, list[str]] = {}
    for record in records:
        with contextlib.suppress(ValueError):
            if record.topic == "snapshots":
                snapshot = SNAPSHOT_CODEC.decode(record.value)
                threads = projects.setdefault(snapshot.project_id, [])
                if snapshot.thread_id not in threads:
                    threads.append(snapshot.thread_id)
    registered = datetime(2026, 1, 1, tzinfo=UTC)
    shown = [
        Conversation(conversation_id=f"conv-{thread}", conversation_type=ConversationType.SINGLE_DEVICE,
                     project_id=project, project_title=project, thread_ids=[thread], updated_at=registered)
        for project, threads in projects.items()
        for thread in threads
    ] + [
        Conversation(conversation_id=f"group-{project}", conversation_type=ConversationType.GROUP,
                     project_id=project, project_title=project, thread_ids=threads, updated_at=registered)
        for project, threads in projects.items()
    ]  # fmt: skip
    return [SimRecord("conversations", c.conversation_id.encode(), encode_record(c), "valid") for c in shown]


def links(registry: list[SimRecord]) -> list[SimRecord]:
    """The conversation links the indicator fold writes for `registry` (`conversations` records), which the engine's
    fold reads to route its thread states: for a run of the engine role alone before any indicator fold."""
    out = []
    for record in registry:
        conversation = CONVERSATION_CODEC.decode(record.value)
        thread = shown_thread_id(conversation)  # a group shows no thread's ring, so it links none
        if thread is not None:
            link = ConversationLink(conversation_id=conversation.conversation_id, thread_id=thread, linked=True)
            out.append(SimRecord(CONVERSATION_LINKS, thread.encode(), encode_record(link), "valid"))
    return out


async def _backlog(settings: Settings, records: list[SimRecord]) -> tuple[int, dict[TopicPartition, int]]:
    """Produce the conversations showing the records' threads, then the records; how many records (the rates' unit:
    the engine's inputs), and the end offset of each of the engine's input partitions after them."""
    await ensure_topics(settings)
    bootstrap = str(settings.kafka_bootstrap_servers)
    await produce(conversations(records), bootstrap, settings.topic_prefix)
    sent = await produce(records, bootstrap, settings.topic_prefix)
    inputs = [settings.topic(t) for t in ("snapshots", "session-events", "handoff-packages")]
    partitions = [TopicPartition(t, p) for t in inputs for p in range(settings.topic_partitions)]
    return sent, await _end_offsets(settings, partitions)


async def _end_offsets(settings: Settings, partitions: list[TopicPartition]) -> dict:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        return await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()


async def _committed(settings: Settings) -> dict:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        return await admin.list_consumer_group_offsets(settings.faust_app_id)
    finally:
        await admin.close()


def faust_floor(settings: Settings, total: int, mode: str = "stream") -> float:
    """Records/s of `bench/faust_floor.py` over the same backlog: with `stream`, the most any Faust agent here can
    do; with `tap`, the most a fold fed by Faust's conductor without a Stream could."""
    script = Path(__file__).with_name("faust_floor.py")
    args = [sys.executable, str(script), str(settings.kafka_bootstrap_servers), settings.topic_prefix, str(total), mode]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=True)
    return float(re.findall(r"(?:floor|tap) (\d+) records/s", done.stdout)[-1])


async def _caught_up(settings: Settings) -> bool:
    """Whether the worker's group has committed every partition it reads up to that partition's end."""
    committed = await _committed(settings)
    if not committed:
        return False  # nothing committed yet
    ends = await _end_offsets(settings, list(committed))
    return all(committed[tp].offset >= end for tp, end in ends.items())


async def raw_ceiling(settings: Settings, topics: list[str], total: int) -> float:
    """Consume every input record and produce one record per input: the floor cost of any Kafka processor."""
    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=settings.kafka_bootstrap_servers,
                                auto_offset_reset="earliest", group_id=f"ceiling-{uuid.uuid4().hex[:6]}")  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, linger_ms=5)
    await consumer.start()
    await producer.start()
    seen = 0
    started = time.perf_counter()
    try:
        while seen < total:
            batches = await consumer.getmany(timeout_ms=500, max_records=BATCH)
            for records in batches.values():
                for record in records:
                    await producer.send(settings.topic("context-events"), record.value, key=record.key)
                seen += len(records)
        await producer.flush()
        await consumer.commit()
    finally:
        await consumer.stop()
        await producer.stop()
    return seen / (time.perf_counter() - started)


async def on_broker(settings: Settings, records: list[SimRecord]) -> None:
    sent, ends = await _backlog(settings, records)
    inputs = sorted({tp.topic for tp in ends})
    ceiling = await raw_ceiling(settings, inputs, sent)
    floor = faust_floor(settings, sent)
    tap = faust_floor(settings, sent, "tap")
    print(f"on {settings.kafka_bootstrap_servers}: {sent} input records, {settings.topic_partitions} partitions")
    print(f"  raw aiokafka consume+produce ceiling {ceiling:10.0f} records/s")
    print(f"  a Faust agent that only acknowledges {floor:10.0f} records/s  ({floor / ceiling:.2f}x)")
    print(f"  ... fed by the conductor, no Stream  {tap:10.0f} records/s  ({tap / ceiling:.2f}x)")

    async with worker_process(settings) as worker, httpx.AsyncClient(timeout=10) as http:
        rate, before, after, elapsed = await drain(http, worker, ends, sent)
        whole = await sunk(sent, worker)
        print(f"  one worker, every role               {rate:10.0f} records/s  ({rate / ceiling:.2f}x of ceiling)")
        print(f"  ... every derived record sunk too    {whole:10.0f} records/s  ({whole / ceiling:.2f}x)")
        _print_worker_figures(before, after, elapsed)
        token = operator_token(Settings(data_dir=worker.data_dir))
        await asyncio.gather(
            latency(settings, rate=LATENCY_RATE, seconds=LATENCY_SECONDS),
            visibility(settings, http, worker.api, token, LATENCY_SECONDS),
        )

    # The same backlog on fresh topics (outputs of the run above would be inputs of the aggregates) for other layouts.
    await engine_then_aggregates(settings, records, ceiling)

    # Several engine processes in one group share the partitions: the most one machine does with the engine role.
    settings = _fresh(settings)
    engine = _with_roles(settings, "engine")
    async with (
        worker_process(engine) as worker,
        worker_process(engine) as other,
        httpx.AsyncClient(timeout=10) as http,
    ):
        await _ready(http, worker, other)  # both in the group before the backlog, so the drain has no rebalance
        # they apply records while the backlog is produced: time them from the first
        first = asyncio.create_task(_first_applied(http, worker, other))
        sent, ends = await _backlog(settings, records)
        await first
        rate, before, after, elapsed = await drain(http, worker, ends, sent, other)
        print(f"  two processes, engine role only      {rate:10.0f} records/s  ({rate / ceiling:.2f}x of ceiling)")

    settings = _fresh(settings)
    sent, ends = await _backlog(settings, records)
    async with (
        worker_process(_with_roles(settings, "engine,projection")) as worker,
        worker_process(_with_roles(settings, "aggregates,sinks")) as rest,
        httpx.AsyncClient(timeout=10) as http,
    ):
        rate, before, after, elapsed = await drain(http, worker, ends, sent)
        whole = await sunk(sent, worker, rest)
        print(f"  engine,projection | aggregates,sinks {rate:10.0f} records/s  ({rate / ceiling:.2f}x of ceiling)")
        print(f"  ... every derived record sunk too    {whole:10.0f} records/s  ({whole / ceiling:.2f}x)")


async def engine_then_aggregates(settings: Settings, records: list[SimRecord], ceiling: float | None) -> None:
    """The backlog on fresh topics through a worker with the engine role only; then the aggregates role alone over
    what the engine wrote (its own group, from the earliest records): whether it keeps up with the engine. The links
    of the registry come first, as the indicator fold would have written them, so the engine routes to the
    conversations as it does in production."""
    settings = _fresh(settings)
    await ensure_topics(settings)
    await produce(links(conversations(records)), str(settings.kafka_bootstrap_servers), settings.topic_prefix)
    sent, ends = await _backlog(settings, records)
    floor = faust_floor(settings, sent)
    print(f"  a Faust agent that only acknowledges {floor:10.0f} records/s  (over this backlog)")
    async with worker_process(_with_roles(settings, "engine")) as worker, httpx.AsyncClient(timeout=10) as http:
        rate, before, after, elapsed = await drain(http, worker, ends, sent)
        of_ceiling = f", {rate / ceiling:.2f}x of ceiling" if ceiling else ""
        print(f"  one worker, engine role only         {rate:10.0f} records/s  ({rate / floor:.2f}x of that agent"
              f"{of_ceiling})")  # fmt: skip
        _print_worker_figures(before, after, elapsed)
    async with worker_process(_with_roles(settings, "aggregates")) as worker, httpx.AsyncClient(timeout=10) as http:
        before = await _first_applied(http, worker)
        aggregates = await sunk(sent, worker)
        after = await _scrape(http, f"{worker.web}/metrics")
        # the engine's input records per second, folded as the thread states they became
        print(f"  ... then the aggregates role alone   {aggregates:10.0f} records/s  ({aggregates / rate:.2f}x of the"
              " engine's)")  # fmt: skip
        _print_worker_figures(before, after, time.perf_counter() - worker.started)


LIVE_LAYOUTS = {
    "split": {"engine": "engine", "aggregates": "aggregates"},
    "one": {"worker": "engine,projection,aggregates,sinks"},
}
"""`--layout`: the engine and the aggregates in two processes, or one worker with every role."""


async def live(
    settings: Settings, records: list[SimRecord], fleet: SimulationConfig, speed: float, layout: str = "split"
) -> None:
    """The engine and the aggregates in two processes, as deployed (or every role in one worker), fed the records at
    the fleet's own pace (`speed` times real time: each thread reports once a turn) rather than as a backlog: do they
    keep up with a live fleet?

    Prints the input rate; each group's largest lag (records between its committed offsets and the ends of what it
    reads, sampled every second; at least what arrives between two commits) in each quarter of the feed, which grows
    when the group falls behind; how long after the last record each group had committed everything; and what a
    reader sees: a probe thread of its own reports a lower budget every second, and the time from each report to its
    conversation's ring and to its project's view showing that percent."""
    settings = _fresh(settings)
    await ensure_topics(settings)
    rate = speed * len(records) / (fleet.turns_per_thread * fleet.turn_seconds)
    async with contextlib.AsyncExitStack() as stack:
        workers = {
            name: await stack.enter_async_context(worker_process(_with_roles(settings, roles)))
            for name, roles in LIVE_LAYOUTS[layout].items()
        }
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
        probe = await stack.enter_async_context(Probe(settings))
        await _ready(http, *workers.values())
        await produce(conversations(records), str(settings.kafka_bootstrap_servers), settings.topic_prefix)
        lags: dict[str, list[tuple[float, int]]] = {name: [] for name in workers}

        async def sample() -> None:
            while True:
                for name, worker in workers.items():
                    worker.check_alive()
                    lags[name].append((time.perf_counter(), await _lag(worker.settings)))
                await asyncio.sleep(1)

        sampler = asyncio.create_task(sample())
        probing = asyncio.create_task(probe.report_every(1.0))
        started = time.perf_counter()
        sent = await produce(records, str(settings.kafka_bootstrap_servers), settings.topic_prefix, rate=rate)
        produced = time.perf_counter()
        probing.cancel()
        caught_up = {}
        for name, worker in workers.items():
            while not await _caught_up(worker.settings):
                worker.check_alive()
                await asyncio.sleep(0.2)
            caught_up[name] = time.perf_counter() - produced
        sampler.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(probe.settle(), timeout=30)
    print(f"  live ({layout}): {fleet.threads} threads in {fleet.projects} projects at {speed:g}x their pace, "
          f"{sent / (produced - started):.0f} records/s for {produced - started:.0f} s")  # fmt: skip
    quarter = (produced - started) / 4
    for name, seconds in caught_up.items():
        largest = [max((lag for at, lag in lags[name] if 0 <= at - started - q * quarter < quarter), default=0)
                   for q in range(4)]  # fmt: skip
        print(f"    {name:10s} largest lag by quarter of the feed {' '.join(f'{n:6d}' for n in largest)} records; "
              f"everything committed {seconds:5.1f} s after the last record")  # fmt: skip
    for view, delays in probe.delays.items():
        p50, p99 = (percentile(delays, q) * 1000 for q in (50, 99)) if delays else (float("nan"),) * 2
        print(f"    a report shown in its {view:12s} p50 {p50:5.0f} ms, p99 {p99:5.0f} ms "
              f"({len(delays)} of {probe.reports} reports)")  # fmt: skip


class Probe:
    """A thread of its own (in `_paced_snapshot`'s project), shown by a single_device conversation of its own, whose
    reports each lower its budget by one point; `delays` are the times from each report to the ring of its
    conversation (`conversation-indicators`) and to its project's view (`project-risk`) showing that percent."""

    THREAD = "probe-thread"
    CONVERSATION = "conv-probe"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        bootstrap = settings.kafka_bootstrap_servers
        self.consumer = AIOKafkaConsumer(settings.topic("conversation-indicators"), settings.topic("project-risk"),
                                         bootstrap_servers=bootstrap, auto_offset_reset="latest")  # fmt: skip
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.sent_at: dict[int, float] = {}
        """Send time by the ring percent the report sets."""
        self.delays: dict[str, list[float]] = {"ring": [], "project view": []}
        self.reports = 0
        self._seen: dict[str, set[int]] = {view: set() for view in self.delays}
        self._more_seen = asyncio.Event()

    async def __aenter__(self) -> Probe:
        await self.producer.start()
        await self.consumer.start()
        await ensure_topics(self.settings)
        registered = Conversation(conversation_id=self.CONVERSATION, conversation_type=ConversationType.SINGLE_DEVICE,
                                  project_id="latency", project_title="latency", thread_ids=[self.THREAD],
                                  updated_at=datetime.now(UTC))  # fmt: skip
        await self._send("conversations", self.CONVERSATION, encode_record(registered))
        self._collector = asyncio.create_task(self._collect())
        return self

    async def __aexit__(self, *_: object) -> None:
        self._collector.cancel()
        await self.consumer.stop()
        await self.producer.stop()

    async def report_every(self, seconds: float) -> None:
        while self.reports < 90:  # 95% down to 5%
            snapshot = _paced_snapshot(self.reports * 100, self.THREAD)
            self.sent_at[int(snapshot.context_budget_remaining_pct)] = time.perf_counter()
            self.reports += 1
            await self._send("snapshots", self.THREAD, encode_record(snapshot))
            await asyncio.sleep(seconds)

    async def settle(self) -> None:
        """Until every report is seen in both views (the caller bounds the wait)."""
        while not self._all_seen():
            self._more_seen.clear()
            await self._more_seen.wait()

    def _all_seen(self) -> bool:
        return all(len(seen) >= self.reports for seen in self._seen.values())

    async def _send(self, topic: str, key: str, value: bytes) -> None:
        await self.producer.send_and_wait(self.settings.topic(topic), value, key=key.encode())

    async def _collect(self) -> None:
        while True:
            for tp, batch in (await self.consumer.getmany(timeout_ms=100)).items():
                arrived = time.perf_counter()
                for record in batch:
                    value = json.loads(record.value)
                    if record.key == self.CONVERSATION.encode():
                        self._shown("ring", value["context_budget_indicator"].get("percent"), arrived)
                    elif tp.topic.endswith("project-risk") and record.key == b"latency":
                        for thread in value["active_thread_contexts"]:
                            if thread["thread_id"] == self.THREAD:
                                self._shown("project view", int(thread["context_budget_remaining_pct"]), arrived)

    def _shown(self, view: str, percent: int | None, arrived: float) -> None:
        if percent in self.sent_at and percent not in self._seen[view]:
            self._seen[view].add(percent)
            self.delays[view].append(arrived - self.sent_at[percent])
            self._more_seen.set()


async def _lag(settings: Settings) -> int:
    """Records between the group's committed offsets and the ends of the partitions it has committed on."""
    committed = await _committed(settings)
    ends = await _end_offsets(settings, list(committed)) if committed else {}
    return sum(max(0, end - committed[tp].offset) for tp, end in ends.items())


def _with_roles(settings: Settings, roles: str) -> Settings:
    return Settings.model_validate({**settings.model_dump(), "roles": roles})


def _fresh(settings: Settings) -> Settings:
    return settings.model_copy(update={"topic_prefix": f"bench{uuid.uuid4().hex[:6]}."})


async def _ready(http: httpx.AsyncClient, *workers: WorkerUnderTest) -> None:
    """Until every worker's /readyz answers 200 (partitions assigned, tables recovered)."""
    for worker in workers:
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(f"{worker.web}/readyz")).status_code == 200:
                    break
            await asyncio.sleep(0.5)


async def sunk(sent: int, *workers: WorkerUnderTest) -> float:
    """Input records/s from the first one applied until every group has committed every partition it reads (derived
    topics too: everything is in ClickHouse)."""
    for worker in workers:
        while not await _caught_up(worker.settings):
            worker.check_alive()
            await asyncio.sleep(0.5)
    return sent / (time.perf_counter() - workers[0].started)


@dataclass
class WorkerUnderTest:
    settings: Settings
    data_dir: Path
    web: str
    """The worker's own web server: /metrics, /readyz."""
    api: str
    process: subprocess.Popen[bytes]
    started: float = 0.0
    """When it was first seen consuming (perf_counter)."""

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            log = (self.data_dir / "worker.log").read_text(errors="replace")
            raise RuntimeError(f"the worker ({','.join(self.settings.roles)}) exited {self.process.returncode}:\n{log}")


@contextlib.asynccontextmanager
async def worker_process(settings: Settings) -> AsyncIterator[WorkerUnderTest]:
    """`ctxbudget run` with the settings' broker, prefix, app id and roles, in a process of its own."""
    data_dir = Path(tempfile.mkdtemp(prefix="bench-"))
    web_port, api_port = free_port(), free_port()
    env = {
        "CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS": str(settings.kafka_bootstrap_servers),
        "CTXBUDGET_TOPIC_PREFIX": settings.topic_prefix,
        "CTXBUDGET_TOPIC_PARTITIONS": str(settings.topic_partitions),
        "CTXBUDGET_APP_ID": settings.app_id,
        "CTXBUDGET_ROLES": ",".join(settings.roles),
        "CTXBUDGET_DATA_DIR": str(data_dir),
        "CTXBUDGET_WORKER_WEB_PORT": str(web_port),
        "CTXBUDGET_API_PORT": str(api_port),
        "PATH": "/usr/bin:/bin",
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),  # the bench's own code
    }
    with (data_dir / "worker.log").open("wb") as log:
        process = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited
            [sys.executable, "-m", "streams", "run"], env=env, stdout=log, stderr=subprocess.STDOUT
        )  # fmt: skip
    try:
        yield WorkerUnderTest(settings, data_dir, f"http://127.0.0.1:{web_port}", f"http://127.0.0.1:{api_port}",
                              process)  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=60)


async def drain(
    http: httpx.AsyncClient,
    worker: WorkerUnderTest,
    ends: dict[TopicPartition, int],
    sent: int,
    *others: WorkerUnderTest,
) -> tuple[float, Samples, Samples, float]:
    """Records/s from the first record the worker (or any of `others` in its group) applied until its group has
    committed every input partition to its end, with the worker's metrics at both ends and the seconds between."""
    before = await _first_applied(http, worker, *others)
    while True:
        await asyncio.sleep(0.2)
        worker.check_alive()
        committed = await _committed(worker.settings)
        if all(tp in committed and committed[tp].offset >= e for tp, e in ends.items()):
            break
    elapsed = time.perf_counter() - worker.started
    return sent / elapsed, before, await _scrape(http, f"{worker.web}/metrics"), elapsed


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _first_applied(http: httpx.AsyncClient, worker: WorkerUnderTest, *others: WorkerUnderTest) -> Samples:
    """Wait for the first record any of the workers applied (their metrics, polled every 0.2 s); note when on each,
    and return the first worker's metrics."""
    before: Samples = {}
    while not worker.started:
        await asyncio.sleep(0.2)
        for each in (worker, *others):
            each.check_alive()
            with contextlib.suppress(httpx.TransportError):
                samples = await _scrape(http, f"{each.web}/metrics")
                if each is worker:
                    before = samples
                if sum(_deltas({}, samples, "ctxbudget_records_consumed_total", "agent").values()):
                    worker.started = time.perf_counter()
    for each in others:
        each.started = worker.started
    return before


async def _scrape(http: httpx.AsyncClient, url: str) -> Samples:
    text = (await http.get(url)).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _deltas(before: Samples, after: Samples, name: str, label: str) -> dict[str, float]:
    """Per value of `label`, how much the counter `name` grew (summed over its other labels)."""
    out: dict[str, float] = {}
    for (sample, labels), value in after.items():
        if sample == name:
            key = dict(labels)[label]
            out[key] = out.get(key, 0.0) + value - before.get((sample, labels), 0.0)
    return out


def _print_worker_figures(before: Samples, after: Samples, elapsed: float) -> None:
    applied = _deltas(before, after, "ctxbudget_records_consumed_total", "agent")
    print("  records applied per agent over the drain (the worker's metrics):")
    for agent, n in sorted(applied.items()):
        print(f"    {agent:28s} {n / elapsed:10.0f} records/s")
    for name, label, what in (
        ("ctxbudget_records_sequenced_total", "verdict", "records not applied as delivered"),
        ("ctxbudget_rewinds_total", "reason", "partition rewinds"),
    ):
        counts = _deltas(before, after, name, label)
        print(f"  {what} over the drain: " + (", ".join(f"{n:.0f} {k}" for k, n in sorted(counts.items())) or "none"))
    rows = _deltas(before, after, "ctxbudget_sink_rows_written_total", "table")
    inserts = _deltas(before, after, "ctxbudget_sink_batch_rows_count", "table")
    print("  ClickHouse rows written per table over the drain:")
    for table, n in sorted(rows.items()):
        per_insert = n / inserts[table] if inserts.get(table) else 0.0
        print(f"    {table:28s} {n / elapsed:10.0f} rows/s  {per_insert:8.0f} rows per insert")


async def visibility(settings: Settings, http: httpx.AsyncClient, api: str, token: str, seconds: float) -> None:
    """One probe snapshot at a time, each polled for through the API until `thread_context_latest` shows it."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all", linger_ms=0)
    await producer.start()
    headers = {"Authorization": f"Bearer {token}"}
    waits: list[float] = []
    try:
        deadline = time.perf_counter() + seconds
        probe = 0
        while time.perf_counter() < deadline:
            snapshot = _paced_snapshot(probe, thread=f"visible-{uuid.uuid4().hex[:8]}")
            url = f"{api}/api/v1/threads/{snapshot.thread_id}/context-budget"
            sent = time.perf_counter()
            await producer.send_and_wait(settings.topic("snapshots"), encode_record(snapshot),
                                         key=snapshot.thread_id.encode())  # fmt: skip
            while time.perf_counter() - sent < 30:
                answer = await http.get(url, headers=headers)
                if answer.status_code == 200:
                    waits.append(time.perf_counter() - sent)
                    break
                await asyncio.sleep(0.02)
            probe += 1
    finally:
        await producer.stop()
    if waits:
        p50, p99 = (percentile(waits, q) * 1000 for q in (50, 99))
        print(f"  visible through the API (produced -> thread_context_latest read back, polled every 20 ms):"
              f" p50 {p50:.0f} ms, p99 {p99:.0f} ms over {len(waits)} probes")  # fmt: skip
    else:
        print("  visible through the API: no probe became visible within 30 s")


async def latency(settings: Settings, rate: float, seconds: float) -> None:
    """Paced snapshots of fresh threads; the time from each send to a thread-state record that reflects it (its own,
    or a newer one of the thread folded in the same batch) at a consumer."""
    consumer = AIOKafkaConsumer(settings.topic("thread-state"), bootstrap_servers=settings.kafka_bootstrap_servers,
                                auto_offset_reset="latest", group_id=f"latency-{uuid.uuid4().hex[:6]}")  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    total = int(rate * seconds)
    all_seen = asyncio.Event()

    async def collect() -> None:
        while True:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                arrived = time.perf_counter()
                for record in records:
                    # a state carries its thread's newest snapshot: every earlier one of the thread is reflected too
                    thread, _, turn = json.loads(record.value)["snapshot_id"].rpartition("-")
                    for earlier in range(int(turn), -1, -1):
                        if (sent := sent_at.pop(f"{thread}-{earlier}", None)) is None:
                            break
                        latencies.append(arrived - sent)
            if len(latencies) == total:
                all_seen.set()

    try:
        await asyncio.sleep(2)  # the consumer's group join, before anything is sent
        collector = asyncio.create_task(collect())
        start = time.perf_counter()
        for i in range(total):
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            snapshot = _paced_snapshot(i)
            sent_at[snapshot.snapshot_id] = time.perf_counter()
            await producer.send(settings.topic("snapshots"), encode_record(snapshot), key=snapshot.thread_id.encode())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_seen.wait(), timeout=30)
        collector.cancel()
    finally:
        await consumer.stop()
        await producer.stop()
    p50, p99 = (percentile(latencies, q) * 1000 for q in (50, 99))
    print(f"  latency at {rate:.0f} snapshots/s for {seconds:.0f} s: p50 {p50:.0f} ms, p99 {p99:.0f} ms"
          f" (snapshot produced -> reflected in a thread-state consumed; {len(sent_at)} of {total} never)")  # fmt: skip


def _paced_snapshot(i: int, thread: str | None = None) -> ThreadContextSnapshot:
    """Fresh threads (one snapshot each time round), each newer than the last, walking the budget down."""
    thread, turn = thread or f"latency-{i % 100:03d}", i // 100
    pct = max(1.0, 95.0 - turn)
    return ThreadContextSnapshot(
        snapshot_id=f"{thread}-{turn}", snapshot_version=turn + 1, thread_id=thread, project_id="latency",
        node_id="bench", worker_id="bench", source_kind=SourceKind.CODEX_APP_SERVER,
        context_budget_remaining_pct=pct, context_budget_level=classify_level(pct), captured_at=datetime.now(UTC),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, help="default 200 (--against: 10,000)")
    parser.add_argument("--turns", type=int, help="default 60 (--against: 2)")
    parser.add_argument("--projects", type=int, help="default 3 (--against: 1,000)")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--aggregates", action="store_true", help="on the broker, only the engine role, then the "
                        "aggregates role over its outputs")  # fmt: skip
    parser.add_argument("--live", type=float, metavar="SPEED", help="on the broker, only the engine and aggregates "
                        "processes fed at SPEED times the fleet's pace")  # fmt: skip
    parser.add_argument("--layout", choices=sorted(LIVE_LAYOUTS), default="split", help="with --live: the engine "
                        "and the aggregates in two processes, or one worker with every role")  # fmt: skip
    parser.add_argument("--against", type=Path, metavar="DIR", help="only the batch function in process, this "
                        "checkout against the one in DIR, in alternating processes")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="with --against")
    parser.add_argument("--repeat", type=int, default=3, help="with --against: runs in each process, the best kept")
    parser.add_argument("--run-batch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--collector", choices=sorted(COLLECTORS), default="worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_batch:
        run_batch(args.run_batch, args.collector, args.repeat)
        return
    default = (10_000, 2, 1_000) if args.against else (200, 60, 3)
    given = (args.threads, args.turns, args.projects)
    threads, turns, projects = (size or fallback for size, fallback in zip(given, default, strict=True))
    fleet = SimulationConfig(threads=threads, projects=projects, turns_per_thread=turns, seed=1)
    records = list(generate(fleet))
    if args.against:
        sys.exit(0 if against(records, fleet, args.against, args.rounds, args.repeat) else 1)
    in_process(records, fleet)
    bootstrap = args.bootstrap or Settings().kafka_bootstrap_servers
    if bootstrap:
        settings = Settings(kafka_bootstrap_servers=bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.",
                            app_id=f"bench-{uuid.uuid4().hex[:6]}")  # fmt: skip
        if args.live:
            run = live(settings, records, fleet, args.live, args.layout)
        elif args.aggregates:
            run = engine_then_aggregates(settings, records, None)
        else:
            run = on_broker(settings, records)
        asyncio.run(run)
    else:
        print("on the broker: skipped (give --bootstrap, or start one with `ctxbudget kafka up`)")


if __name__ == "__main__":
    main()
