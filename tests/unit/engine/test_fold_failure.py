"""A fold that raises on one record (a bug, not bad input) dead-letters that record whole and goes on, so it does not
hold its partition and every thread behind it; a timer that raises on one thread does not stop the others'."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.engine_config import EngineConfig
from schemas import DEFAULT_POLICY, Codec, ThreadContextSnapshot
from schemas.codec import encode_record
from streams.batching import Change, InputMessage, fold_records
from streams.engine import batch
from streams.engine.fold import apply_snapshot
from tests.unit.engine.builders import T0, snapshot

NOW = T0 + timedelta(minutes=1)
CONFIG = EngineConfig()


def message(record, key: str, offset: int) -> InputMessage:
    return InputMessage("snapshots", 0, offset, key.encode(), encode_record(record))


def failing_for(thread: str, real, thread_of):
    """`real`, raising where `thread_of(first argument, second argument)` is `thread`."""

    def fold(first, second, *args):
        if thread_of(first, second) == thread:
            raise ValueError("a bug in the fold")
        return real(first, second, *args)

    return fold


def test_the_engine_dead_letters_the_record_it_raised_on_and_folds_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "_fold", failing_for("thread-bad", batch._fold, lambda slot, record: record.thread_id))
    bad = message(snapshot(40, thread="thread-bad"), "thread-bad", 0)
    good = message(snapshot(40, thread="thread-good"), "thread-good", 1)
    result = batch.process_batch([bad, good], lambda _: None, lambda _: None, NOW, CONFIG, "ctx.")
    (letter,) = [e.record for e in result.emits if e.topic == "deadletter"]
    assert (letter.reason, letter.detail, letter.offset) == ("fold_failed", "ValueError: a bug in the fold", 0)
    assert letter.original_value == bad.value
    assert set(result.states) == {"thread-good"}
    assert result.outcomes["fold_failed"] == 1


def test_a_timer_failing_on_one_thread_still_runs_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    slots = [
        (thread, apply_snapshot(None, snapshot(40, thread=thread), DEFAULT_POLICY, T0, CONFIG).slot)
        for thread in ("thread-bad", "thread-good")
    ]
    monkeypatch.setattr(batch, "tick", failing_for("thread-bad", batch.tick, lambda slot, now: slot.state.thread_id))
    result = batch.tick_all(slots, T0 + timedelta(hours=1), CONFIG)
    assert set(result.states) == {"thread-good"}  # gone stale by the timer
    assert result.outcomes["tick_failed"] == 1


def test_fold_records_dead_letters_what_its_fold_raised_on() -> None:
    def apply(state, record, at) -> Change[int]:
        if record.thread_id == "thread-bad":
            raise KeyError("missing")
        return Change((state or 0) + 1)

    messages = [message(snapshot(40, thread=t), t, i) for i, t in enumerate(["thread-bad", "thread-good"])]
    result = fold_records(messages, lambda _: None, {"snapshots": Codec(ThreadContextSnapshot)},
                          key_of=lambda r: r.thread_id, apply=apply, now=NOW, prefix="ctx.")  # fmt: skip
    assert result.states == {"thread-good": 1}
    assert [(e.record.reason, e.record.original_value) for e in result.emits] == [("fold_failed", messages[0].value)]
