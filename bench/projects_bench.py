"""Project-fold throughput, printed against a baseline measured in the same run (machines here are noisy).

    .venv/bin/python -m bench.projects_bench [--projects 1000] [--threads 10000] [--updates 50000]

Thread states of `--threads` threads spread over `--projects` projects, each update a random walk of one thread's
budget, as JSON bytes. Baseline: decoding those bytes alone. Measured: decode + the project fold, then the same with
the table value encoded and decoded as a Faust table with a JSON changelog would; then the topology's whole path in
batches: the routing the engine's fold runs (here fed the thread states as bytes: `builders.ROUTING`), then the
project and indicator folds (`streams.aggregates.batch`) with byte tables, every record between them encoded and
decoded as on Kafka, each thread shown by a single_device conversation and each project by a group one.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from datetime import timedelta

from core.actions import actions_for_level
from core.levels import classify_level
from core.topics import THREAD_STATE
from schemas import Codec, Conversation, ConversationType, ThreadState
from schemas.projects import ProjectState
from streams.aggregates.batch import CONVERSATIONS, PROJECT_CODEC
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.risk import apply_thread_state
from streams.runtime.memory import MemoryRuntime
from tests.unit.aggregates.builders import T0, aggregates

STATE_CODEC = Codec(ThreadState)
BATCH = 2000
"""Records per batch, as `Settings.batch_size`."""


def workload(projects: int, threads: int, updates: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    pct = [rnd.uniform(20, 100) for _ in range(threads)]
    out = []
    for i in range(updates):
        thread = rnd.randrange(threads)
        pct[thread] = min(100.0, max(0.0, pct[thread] + rnd.uniform(-0.4, 0.25)))
        level = classify_level(pct[thread])
        at = T0 + timedelta(milliseconds=10 * i)
        state = ThreadState(
            thread_id=f"thread-{thread}",
            project_id=f"proj-{thread % projects}",
            node_id=f"node-{thread % 50}",
            worker_id=f"worker-{thread % 50}",
            source_kind="codex_app_server",
            snapshot_id=f"s-{i}",
            snapshot_version=i,
            captured_at=at,
            context_budget_remaining_pct=pct[thread],
            reported_level=level,
            context_budget_level=level,
            compaction_expected_at=T0 + timedelta(minutes=60 + thread % 240),
            must_finish_before_compaction=pct[thread] < 40,
            next_required_report_in_seconds=5,
            report_deadline_at=at + timedelta(seconds=15),
            due_actions=actions_for_level(level),
            updated_at=at,
        )
        out.append(STATE_CODEC.encode(state))
    return out


def rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


def registry(projects: int, threads: int) -> list[Conversation]:
    """One single_device conversation per thread and one group conversation per project."""
    single = [
        Conversation(
            conversation_id=f"conv-{t}",
            conversation_type=ConversationType.SINGLE_DEVICE,
            project_id=f"proj-{t % projects}",
            project_title=f"project {t % projects}",
            thread_ids=[f"thread-{t}"],
            updated_at=T0,
        )
        for t in range(threads)
    ]
    group = [
        Conversation(
            conversation_id=f"group-{p}",
            conversation_type=ConversationType.GROUP,
            project_id=f"proj-{p}",
            project_title=f"project {p}",
            thread_ids=[f"thread-{t}" for t in range(p, threads, projects)][:100],
            updated_at=T0,
        )
        for p in range(projects)
    ]
    return [*single, *group]


def batch_path(
    records: list[bytes], conversations: list[Conversation], config: ProjectsConfig
) -> tuple[float, MemoryRuntime]:
    """Registry first, then the thread states in batches of BATCH, each drained through the aggregates role's folds
    as the topology declares them (the in-memory runtime: every output encoded, as a worker sends it)."""
    topics = aggregates(T0 + timedelta(minutes=10), config)  # just after the last update, before any retirement
    for entry in conversations:
        topics.produce(CONVERSATIONS, entry.conversation_id, entry)
    topics.drain(BATCH)
    topics.published.clear()
    keys = [STATE_CODEC.decode(raw).thread_id for raw in records]
    started = time.perf_counter()
    for i in range(0, len(records), BATCH):
        for key, raw in zip(keys[i : i + BATCH], records[i : i + BATCH], strict=True):
            topics.produce(THREAD_STATE, key, raw)
        topics.drain(BATCH)
    return rate(len(records), started), topics


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--projects", type=int, default=1_000)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=50_000)
    args = parser.parse_args()
    records = workload(args.projects, args.threads, args.updates)
    config = ProjectsConfig()

    started = time.perf_counter()
    decoded = [STATE_CODEC.decode(raw) for raw in records]
    decode_only = rate(len(records), started)

    started = time.perf_counter()
    tables: dict[str, ProjectState] = {}
    published = 0
    for raw in records:
        thread = STATE_CODEC.decode(raw)
        change = apply_thread_state(tables.get(thread.project_id), thread, thread.updated_at, config)
        if change.state is not None:
            tables[thread.project_id] = change.state
        published += len(change.emits) // 2
    fold = rate(len(records), started)

    started = time.perf_counter()
    stored: dict[str, bytes] = {}
    for raw in records:
        thread = STATE_CODEC.decode(raw)
        held = stored.get(thread.project_id)
        change = apply_thread_state(PROJECT_CODEC.decode(held) if held else None, thread, thread.updated_at, config)
        if change.state is not None:
            stored[thread.project_id] = PROJECT_CODEC.encode(change.state)
    with_table = rate(len(records), started)
    path_rate, topics = batch_path(records, registry(args.projects, args.threads), config)
    path_published = Counter(e.topic for e in topics.published)
    seconds = len(records) / path_rate

    print(f"{len(decoded)} thread states, {args.threads} threads in {args.projects} projects")
    print(f"  decode only (baseline)        {decode_only:10.0f} updates/s")
    print(f"  decode + project fold         {fold:10.0f} updates/s  ({fold / decode_only:.2f}x of decode only)")
    print(f"  + table value decode/encode   {with_table:10.0f} updates/s  ({with_table / decode_only:.2f}x)")
    print(f"  project views published: {published} ({published / len(records):.0%} of updates)")
    print(f"  whole batch path, 3 folds     {path_rate:10.0f} updates/s  ({path_rate / decode_only:.2f}x)")
    for topic, count in sorted(path_published.items()):
        print(f"    {topic:26} {count:8d} records, {count / seconds:8.0f}/s")


if __name__ == "__main__":
    main()
