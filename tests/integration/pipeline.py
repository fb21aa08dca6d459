"""Helpers to drive the real pipeline in tests: worker processes, a producer, and a collector of output topics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from core.settings import Settings
from schemas import Record
from schemas.codec import encode_record
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics

OUTPUT_TOPICS = (
    "thread-state",
    "context-events",
    "alerts",
    "master-actions",
    "client-events",
    "deadletter",
    "compactions",
    "project-risk",
    "conversation-indicators",
    "snapshot-verdicts",
    "compaction-points",
)


def get_json(url: str, token: str | None = None) -> Any:
    """GET a JSON body (blocking: call it through asyncio.to_thread from a test's loop)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return json.loads(response.read())


def get_status(url: str) -> tuple[int, str]:
    """GET a status and its body, an error status (a 503 with its reasons) included (blocking)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def get_when_up(url: str, within: float, alive: Callable[[], bool] = lambda: True) -> str:
    """GET a text body, retrying while the server does not answer yet, unless `alive` says it never will
    (blocking)."""
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline or not alive():
                raise
            time.sleep(0.5)


def listed_conversation(api: str, token: str, conversation_id: str) -> dict[str, Any] | None:
    """The conversation as the BFF lists it (6.1), or None while it is not listed (blocking)."""
    body = get_json(f"{api}/api/v1/conversations", token)
    return next((item for item in body["items"] if item["conversation_id"] == conversation_id), None)


async def until_listed(
    api: str, token: str, conversation_id: str, within: float, *, with_ring: bool = True, percent: int | None = None
) -> dict[str, Any]:
    """Read the list until the conversation is in it, with a ring percent unless `with_ring` is False (with that
    `percent` when given): the list reads ClickHouse, so this waits for the sink to have written the pipeline's
    item, and the sink may write a thread's earlier rings in batches before its latest."""
    deadline = time.monotonic() + within
    while True:
        found = await asyncio.to_thread(listed_conversation, api, token, conversation_id)
        shown = found["context_budget_indicator"].get("percent") if found is not None else None
        if found is not None and (not with_ring or shown is not None) and percent in (None, shown):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{conversation_id} not listed within {within} s: {found}")
        await asyncio.sleep(0.5)


STOP_SECONDS = 60
"""How long `WorkerProcess.stop` waits for a worker to exit after Ctrl-C before it kills it."""
LINE_CHARS = 3000
"""The most of one log line `WorkerProcess.describe` shows (a stuck rebalance's report is one long line)."""


class WorkerProcess:
    """`ctxbudget run` (or the module `module`, run the same way) against the test broker, in its own process so it can
    be killed like a real one."""

    def __init__(self, settings: Settings, data_dir: Path, module: str = "streams run", **overrides: str) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_")}
        self.env.update(
            CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS=str(settings.kafka_bootstrap_servers),
            CTXBUDGET_TOPIC_PREFIX=settings.topic_prefix,
            CTXBUDGET_TOPIC_PARTITIONS=str(settings.topic_partitions),
            CTXBUDGET_APP_ID=settings.app_id,
            CTXBUDGET_DATA_DIR=str(data_dir),
            CTXBUDGET_KAFKA_CACHE_DIR=str(settings.kafka_cache_dir),
            # workers side by side: each API and web server on a free port; a stop that hangs dumps its stacks
            # (streams.runtime.app.Worker) before `stop` gives up on it, so a failing test shows what it waited for
            **{
                "CTXBUDGET_API_PORT": "0",
                "CTXBUDGET_WORKER_WEB_PORT": str(free_port()),
                "CTXBUDGET_SHUTDOWN_SECONDS": str(STOP_SECONDS - 10),
                **overrides,
            },
        )
        self.module = module
        self.log = data_dir / "worker.log"
        self.web = f"http://127.0.0.1:{self.env['CTXBUDGET_WORKER_WEB_PORT']}"
        """The worker's /healthz, /readyz and /metrics."""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *self.module.split()], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final commit, no flush."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self, timeout: float = STOP_SECONDS) -> int:
        """Ctrl-C, as an operator would; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def output(self) -> str:
        """What the worker wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def describe(self, lines: int = 25) -> str:
        """Its state for a failing test's message: running or its exit code, what `/readyz` says (rebalancing,
        recovering tables...), its last errors (a stuck rebalance's report) and the end of its log (Faust's warnings
        and the progress lines)."""
        assert self.process is not None
        if self.alive():
            try:
                _, readiness = get_status(f"{self.web}/readyz")  # 503 while not ready, with the failing checks
            except OSError as error:
                readiness = f"no answer ({error})"
            state = f"running, /readyz: {readiness}"
        else:
            state = f"exited {self.process.returncode}"
        logged = self.output().splitlines()
        errors = [line for line in logged[:-lines] if '"level": "ERROR"' in line][-3:]  # before the tail too
        shown = [line[:LINE_CHARS] for line in [*errors, *logged[-lines:]]]
        return "\n".join([f"worker {self.log.parent.name} (pid {self.process.pid}) {state}", *shown])

    async def printed(self, label: str, within: float = 120) -> str:
        """What the worker printed after `label` on a line of its own (`web page and API: `, `operator token: `)."""
        line = await self._first_line(lambda line: line.startswith(label), label, within)
        return line.removeprefix(label).strip()

    async def logged(self, text: str, within: float = 120) -> str:
        """The first line of its output that contains `text`."""
        return await self._first_line(lambda line: text in line, text, within)

    async def _first_line(self, matches: Callable[[str], bool], what: str, within: float) -> str:
        deadline = time.monotonic() + within
        while True:
            line = next((line for line in self.output().splitlines() if matches(line)), None)
            if line is not None:
                return line
            if not self.alive() or time.monotonic() > deadline:
                raise AssertionError(f"the worker never printed {what!r}:\n{self.output()}")
            await asyncio.sleep(0.2)


class ServedWorker(NamedTuple):
    settings: Settings
    """The test session's settings with the worker's own app id (its consumer groups and changelogs)."""
    api: str
    worker: WorkerProcess


@contextlib.asynccontextmanager
async def served_worker(
    settings: Settings, data_dir: Path, up_within: float = 90, **overrides: str
) -> AsyncIterator[ServedWorker]:
    """A fresh `ctxbudget run` serving its API on a free port, once its health answers; stopped at the end, where it
    must exit cleanly. Staleness is stretched (`CTXBUDGET_STALE_FACTOR`) so a slow test machine marks no thread
    stale; `overrides` are more of the worker's environment."""
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    port = free_port()
    environment = {"CTXBUDGET_API_PORT": str(port), "CTXBUDGET_STALE_FACTOR": "1000", **overrides}
    worker = WorkerProcess(settings, data_dir, **environment).start()
    api = f"http://127.0.0.1:{port}"
    try:
        await asyncio.to_thread(get_when_up, f"{api}/healthz", up_within, worker.alive)
        yield ServedWorker(settings, api, worker)
    finally:
        assert worker.stop() == 0, worker.output()


async def produce(settings: Settings, records: list[tuple[str, bytes | str, bytes | Record]]) -> None:
    """Send (topic, key, value) in order and wait for every acknowledgement."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for topic, key, value in records:
            payload = value if isinstance(value, bytes) else encode_record(value)
            raw_key = key.encode() if isinstance(key, str) else key
            await producer.send_and_wait(settings.topic(topic), payload, key=raw_key)
    finally:
        await producer.stop()


async def committed_offsets(settings: Settings) -> dict[TopicPartition, int]:
    """The worker group's committed offsets."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.app_id)
    except GroupCoordinatorNotAvailableError:
        return {}  # the broker is still electing it: nothing committed as far as we can tell
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


def committed_records(committed: dict[TopicPartition, int], topic: str) -> int:
    """How many records of the (prefixed) `topic` the group has committed, over its partitions."""
    return sum(offset for tp, offset in committed.items() if tp.topic == topic)


class Outputs:
    """Collects every output record in the background, decoded as JSON, in per-partition order."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Outputs:
        self._consumer = AIOKafkaConsumer(
            *(self.settings.topic(t) for t in OUTPUT_TOPICS),
            bootstrap_servers=self.settings.kafka_bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            metadata_max_age_ms=1000,
        )
        await self._consumer.start()
        self._task = asyncio.create_task(self._collect())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        assert self._consumer is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._consumer.stop()

    async def _collect(self) -> None:
        assert self._consumer is not None
        prefix = self.settings.topic_prefix
        while True:
            batches = await self._consumer.getmany(timeout_ms=200)
            for tp, messages in batches.items():
                for message in messages:
                    self.records[tp.topic.removeprefix(prefix)].append(json.loads(message.value))

    async def wait_for(self, condition: Callable[[Outputs], bool], within: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + within
        while not condition(self):
            assert self._task is not None
            if self._task.done():  # the collector failed: nothing more will arrive, and its error says why
                self._task.result()
            if time.monotonic() > deadline:
                counts = {topic: len(records) for topic, records in self.records.items()}
                raise AssertionError(f"timed out waiting for {what or condition}; collected {counts}")
            await asyncio.sleep(0.1)

    def latest_states(self) -> dict[str, dict[str, Any]]:
        """The newest thread-state per thread (compacted-topic semantics)."""
        latest: dict[str, dict[str, Any]] = {}
        for state in self.records["thread-state"]:
            latest[state["thread_id"]] = state
        return latest

    def of_thread(self, topic: str, thread_id: str) -> list[dict[str, Any]]:
        return [r for r in self.records[topic] if r.get("thread_id") == thread_id]
