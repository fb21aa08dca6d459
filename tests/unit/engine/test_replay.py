"""Issue 20.11: a replayed batch, or a timer run again after a restart, publishes byte-identical records.

An output's times come from its cause (the input record's time in the log, or the deadline that fired), never from
the clock of the worker that happens to apply it.
"""

from __future__ import annotations

from datetime import timedelta

from core.engine_config import EngineConfig
from core.topics import HANDOFF_PACKAGES, MASTER_ACTION_COMMANDS, SESSION_EVENTS, SNAPSHOTS
from schemas.codec import encode_record
from streams.batching import BatchResult, InputMessage
from streams.engine.batch import process_batch, tick_all
from streams.engine.fold import ThreadSlot
from tests.unit.engine.builders import action_command, at, compaction_started, package, snapshot

CONFIG = EngineConfig()


def _messages() -> list[InputMessage]:
    inputs = [
        (SNAPSHOTS, snapshot(80, seconds=0)),
        (SNAPSHOTS, snapshot(20, seconds=5, must_finish=True)),
        (HANDOFF_PACKAGES, package("draft", seconds=6)),
        (SESSION_EVENTS, compaction_started(seconds=8)),
    ]
    return [
        InputMessage(topic, 0, offset, b"thread-a", encode_record(record), timestamp=at(offset + 1))
        for offset, (topic, record) in enumerate(inputs)
    ]


def _published(result: BatchResult[ThreadSlot]) -> list[tuple[str, str, bytes]]:
    return [(e.topic, e.key, encode_record(e.record)) for e in result.emits]


def test_the_same_batch_applied_twice_publishes_identical_records() -> None:
    messages = _messages()
    first = process_batch(messages, {}.get, {}.get, at(10), CONFIG, "ctx.")
    replay = process_batch(messages, {}.get, {}.get, at(40), CONFIG, "ctx.")  # a restart, 30 s later
    assert _published(first)
    assert _published(replay) == _published(first)
    assert replay.states == first.states


def test_a_timer_output_carries_the_deadline_that_fired_it() -> None:
    slots = process_batch(_messages(), {}.get, {}.get, at(10), CONFIG, "ctx.").states
    deadline = slots["thread-a"].state.report_deadline_at
    late = tick_all(slots.items(), deadline + timedelta(seconds=3), CONFIG)
    later = tick_all(slots.items(), deadline + timedelta(seconds=9), CONFIG)
    assert _published(late)
    assert _published(later) == _published(late)
    [stale] = [e.record for e in late.emits if e.topic == "context-events"]
    assert stale.occurred_at == deadline


def test_master_action_states_carry_the_time_of_the_input_that_moved_them() -> None:
    """Issue 21's lifecycle records too: issued at the snapshot's log time, acknowledged at the command's."""
    issuing = InputMessage(SNAPSHOTS, 0, 0, b"thread-a", encode_record(snapshot(20, seconds=0)), timestamp=at(2))
    issued = process_batch([issuing], {}.get, {}.get, at(50), CONFIG, "ctx.")
    [item, *_] = issued.states["thread-a"].state.master_actions
    assert (item.issued_at, item.state_changed_at) == (at(2), at(2))
    command = encode_record(action_command(item.action_id, seconds=3))
    acking = InputMessage(MASTER_ACTION_COMMANDS, 0, 0, b"thread-a", command, timestamp=at(4))
    acked = process_batch([acking], issued.states.get, {}.get, at(60), CONFIG, "ctx.")
    replay = process_batch([acking], issued.states.get, {}.get, at(90), CONFIG, "ctx.")
    [record] = [e.record for e in acked.emits if e.topic == "master-actions"]
    assert (record.state, record.issued_at, record.state_changed_at) == ("acknowledged", at(2), at(4))
    assert _published(replay) == _published(acked)
