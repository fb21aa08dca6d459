"""Issue 20.11: a replayed batch, or a timer run again after a restart, publishes byte-identical records.

An output's times come from its cause (the input record's time in the log, or the deadline that fired), never from
the clock of the worker that happens to apply it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from core.engine_config import EngineConfig
from core.topics import HANDOFF_PACKAGES, MASTER_ACTION_COMMANDS, SESSION_EVENTS, SNAPSHOTS
from schemas import SnapshotVerdict, ThreadWorkerMoved
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


def _contents_by_id(*results: BatchResult[ThreadSlot]) -> dict[str, set[bytes]]:
    """Every verdict (by its snapshot's id) and every event (by its id) the results published, with each content."""
    contents: dict[str, set[bytes]] = defaultdict(set)
    for result in results:
        for emit in result.emits:
            record = emit.record
            key = (
                record.snapshot.snapshot_id
                if isinstance(record, SnapshotVerdict)
                else getattr(record, "event_id", None)
            )
            if key is not None:
                contents[key].add(encode_record(record))
    return contents


def test_a_replay_over_the_slots_a_killed_worker_wrote_publishes_nothing_new_under_an_old_id() -> None:
    """Issue 38.8: the slots are written before the offsets are committed, so a worker killed in between reads the
    batch again over slots that already hold it. The first pass accepted each snapshot; the replay must not publish
    `not_newer` (or anything else) under the same snapshot or event ids."""
    inputs = [snapshot(80, version=1), snapshot(50, version=2), snapshot(20, version=3, must_finish=True)]
    messages = [
        InputMessage(SNAPSHOTS, 0, offset, b"thread-a", encode_record(record), timestamp=at(offset + 1))
        for offset, record in enumerate(inputs)
    ]
    first = process_batch(messages[:2], {}.get, {}.get, at(10), CONFIG, "ctx.")
    second = process_batch(messages[2:], first.states.get, {}.get, at(11), CONFIG, "ctx.")
    replay = process_batch(messages, second.states.get, {}.get, at(40), CONFIG, "ctx.")
    verdicts = [e.record.verdict for e in first.emits + second.emits if isinstance(e.record, SnapshotVerdict)]
    assert verdicts == ["accept"] * 3
    assert {key: len(seen) for key, seen in _contents_by_id(first, second, replay).items() if len(seen) > 1} == {}


def test_a_record_judged_against_an_earlier_state_is_not_judged_again_against_a_later_one() -> None:
    """The slot notes every record its thread read, changed or not: a snapshot refused as another worker's, before
    an operator moved the thread to that worker, stays refused when the batch is read again over the moved slot."""
    first_report = snapshot(80, version=1)
    takeover = snapshot(70, version=2, seconds=2).model_copy(update={"worker_id": "worker-b"})
    move = ThreadWorkerMoved(
        thread_id="thread-a",
        event_id="move-1",
        occurred_at=at(3),
        project_id="proj-1",
        from_worker_id="worker-mac-01",
        to_worker_id="worker-b",
        moved_by="ops",
        reason="retired",
    )
    inputs = [(SNAPSHOTS, 0, first_report), (SNAPSHOTS, 1, takeover), (SESSION_EVENTS, 0, move)]
    messages = [
        InputMessage(topic, 0, offset, b"thread-a", encode_record(record), timestamp=at(index + 1))
        for index, (topic, offset, record) in enumerate(inputs)
    ]
    first = process_batch(messages, {}.get, {}.get, at(10), CONFIG, "ctx.")
    assert [e.record.reason for e in first.emits if e.topic == "deadletter"] == ["worker_mismatch"]
    replay = process_batch(messages, first.states.get, {}.get, at(40), CONFIG, "ctx.")
    assert replay.emits == []


def test_records_logged_in_one_millisecond_give_the_thread_strictly_ordered_states() -> None:
    """Cut into single-record batches (as a replay may cut them), the states the first pass coalesced are published
    too: each must be older than the one after it, or a reader holding the newest would take an earlier one for it."""
    inputs = [snapshot(80, version=1), snapshot(50, version=2), snapshot(20, version=3)]
    slots: dict[str, ThreadSlot] = {}
    times = []
    for offset, record in enumerate(inputs):
        message = InputMessage(SNAPSHOTS, 0, offset, b"thread-a", encode_record(record), timestamp=at(1))
        result = process_batch([message], slots.get, {}.get, at(10), CONFIG, "ctx.")
        slots.update(result.states)
        times += [e.record.updated_at for e in result.emits if e.topic == "thread-state"]
    assert len(set(times)) == 3
    assert times == sorted(times)
    assert times[0] == at(1)
