"""The engine's timer wakes a thread only at its next deadline (`next_deadline`), and publishes exactly what a timer
that looked at every thread on every tick published (issue 24): `tick` changes nothing before that instant."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.deadlines import DeadlineIndex
from core.engine_config import EngineConfig
from core.topics import HANDOFF_PACKAGES, SESSION_EVENTS, SNAPSHOTS
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.engine.batch import process_batch, tick_all
from streams.engine.fold import ThreadSlot, next_deadline
from tests.unit.engine.builders import at, compaction_started, package, snapshot

CONFIG = EngineConfig(handoff_ttl=timedelta(minutes=20))
STEP = timedelta(seconds=5)
"""The timers' period in this test (the worker's is a second; any period shows the same)."""


def _threads() -> dict[str, ThreadSlot]:
    """Threads whose deadlines differ: staleness, handoff grace and expiry, the compaction horizon."""
    inputs = [
        (SNAPSHOTS, "safe", snapshot(80, thread="safe")),
        (SNAPSHOTS, "critical", snapshot(4, thread="critical", must_finish=True)),
        (SNAPSHOTS, "horizon", snapshot(45, thread="horizon", must_finish=True, expected_in=600)),
        (SNAPSHOTS, "draft", snapshot(12, thread="draft", seconds=2)),
        (HANDOFF_PACKAGES, "draft", package("draft", thread="draft", seconds=3)),
        (SNAPSHOTS, "compacting", snapshot(9, thread="compacting", must_finish=True)),
        (SESSION_EVENTS, "compacting", compaction_started(thread="compacting", seconds=4)),
    ]
    messages = [
        InputMessage(topic, 0, offset, thread.encode(), encode_record(record), timestamp=at(5))
        for offset, (topic, thread, record) in enumerate(inputs)
    ]
    return process_batch(messages, {}.get, {}.get, at(5), CONFIG, "ctx.").states


def _every_thread(slots: dict[str, ThreadSlot], times: list[datetime]) -> list[bytes]:
    published = []
    for now in times:
        result = tick_all(sorted(slots.items()), now, CONFIG)
        slots.update(result.states)
        published += [encode_record(e.record) for e in result.emits]
    return published


def _indexed(slots: dict[str, ThreadSlot], times: list[datetime]) -> tuple[list[bytes], int]:
    """As the runtime does: a written slot is indexed by its first deadline, an unchanged one by the next after now."""
    index: DeadlineIndex[str] = DeadlineIndex()
    for thread, slot in slots.items():
        index.set(thread, next_deadline(slot, None, CONFIG))
    published, looked_at = [], 0
    for now in times:
        due = sorted(index.due(now))
        looked_at += len(due)
        result = tick_all(((t, slots[t]) for t in due), now, CONFIG)
        for thread in due:
            if thread in result.states:
                slots[thread] = result.states[thread]
                index.set(thread, next_deadline(slots[thread], None, CONFIG))
            else:
                index.set(thread, next_deadline(slots[thread], now, CONFIG))
        published += [encode_record(e.record) for e in result.emits]
    return published, looked_at


def test_waking_threads_at_their_deadlines_publishes_what_looking_at_every_thread_published() -> None:
    times = [at(5) + STEP * i for i in range(1, 2 * 60 * 60 // 5)]  # two hours: past every deadline of the threads
    threads = _threads()
    walked = _every_thread(dict(threads), times)
    woken, looked_at = _indexed(dict(threads), times)
    assert len(walked) > 10  # stale, handoff_missing, expiry, risk: the timer had work
    assert woken == walked
    assert looked_at < len(threads) * len(times) / 50


def test_a_thread_without_a_state_or_deadline_is_never_woken() -> None:
    assert next_deadline(ThreadSlot(), None, CONFIG) is None
    slot = _threads()["safe"]
    deadline = slot.state.report_deadline_at
    assert next_deadline(slot, None, CONFIG) == deadline
    assert next_deadline(slot, deadline, CONFIG) is None  # stale is its only deadline: after it, nothing turns by time
