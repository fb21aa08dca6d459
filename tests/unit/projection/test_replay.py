"""Issue 20.11 for the projection: a replayed batch publishes byte-identical records. Readings, snapshots, actions
and compaction records carry their events' times, dead letters the record's time in the log."""

from __future__ import annotations

from datetime import timedelta

from core.topics import SESSION_EVENTS
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.projection.batch import projection_batch
from tests.unit.projection.builders import T0, THREAD, at, compact_requested, completed, message, started, usage
from tests.unit.projection.test_batch import PROJECTION


def _identified(event):
    return event.model_copy(update={"project_id": "proj-1", "node_id": "node-1", "worker_id": "worker-mac-01"})


def test_the_same_batch_applied_twice_publishes_identical_records() -> None:
    events = [
        encode_record(usage(200_000, 0, model="gpt-5-codex", window=272_000)),  # no identity yet: a dead letter
        encode_record(_identified(usage(230_000, 1, model="gpt-5-codex", window=272_000))),
        encode_record(_identified(message(1_000, 2))),
        encode_record(_identified(compact_requested(3))),
        encode_record(_identified(started(4))),
        encode_record(_identified(completed(5, before=231_000, after=9_000))),
        b'{"type": "usage_sample"}',
    ]
    messages = [
        InputMessage(SESSION_EVENTS, 0, i, THREAD.encode(), raw, timestamp=at(i + 1)) for i, raw in enumerate(events)
    ]
    first = projection_batch(messages, {}.get, T0 + timedelta(seconds=10), PROJECTION, "ctx.")
    replay = projection_batch(messages, {}.get, T0 + timedelta(hours=2), PROJECTION, "ctx.")
    topics = {e.topic for e in first.emits}
    assert {"snapshots", "thread-projections", "compactions", "deadletter"} <= topics
    assert [(e.topic, e.key, encode_record(e.record)) for e in replay.emits] == [
        (e.topic, e.key, encode_record(e.record)) for e in first.emits
    ]
    assert replay.states == first.states
