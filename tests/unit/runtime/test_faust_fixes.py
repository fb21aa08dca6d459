"""The commit bookkeeping Faust's consumer is patched with (streams/runtime/faust_fixes.py), on its data structures.

Each correction's scenario runs twice: against the method as Faust ships it (`faust_fixes.UPSTREAM`), which
misbehaves (so the correction is needed), and against the correction, which does not."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage
from intervaltree import IntervalTree

from core.settings import Settings
from core.topics import compacted_topics
from streams.runtime import faust_fixes
from streams.runtime.faust_fixes import PATCHES, UPSTREAM, _add_gap, _new_offset

EVENTS = TP("ctx.snapshots", 0)
STATES = TP("ctx.thread-state", 0)
UPSTREAM_NEW_OFFSET = UPSTREAM["_new_offset"]


class _App:
    """An app no progress is tracked for: these topics commit by acknowledgements."""

    topics = SimpleNamespace(acks_enabled_for=lambda topic: True)


def _consumer(committed: int | None, acked: list[int]) -> Any:
    consumer = SimpleNamespace(
        app=_App(),
        _acked=defaultdict(list),
        _acked_index=defaultdict(set),
        _gap=defaultdict(IntervalTree),
        _committed_offset=defaultdict(lambda: None),
        _unacked_messages=set(),
        _n_acked=0,
        _waiting_for_ack=None,
    )
    for tp in (EVENTS, STATES):
        consumer._committed_offset[tp] = committed
        consumer._acked[tp] = list(acked)
        consumer._acked_index[tp] = set(acked)
    return consumer


def test_every_correction_replaces_a_method_faust_ships() -> None:
    assert set(PATCHES) == set(UPSTREAM)


def test_commits_stop_at_the_first_offset_not_acknowledged() -> None:
    consumer = _consumer(committed=10, acked=[10, 11, 13])
    assert _new_offset(consumer, EVENTS) == 12
    consumer._committed_offset[EVENTS] = 12
    assert _new_offset(consumer, EVENTS) is None  # 12 is still owed


@pytest.mark.parametrize(
    ("committed", "acked", "upstream_commits"),
    [(10, [11, 12], 13), (0, [5, 6], 7)],
    ids=["the record right at the committed offset", "anything while the committed offset is 0"],
)
def test_the_record_at_the_committed_offset_must_be_acknowledged_too(
    committed: int, acked: list[int], upstream_commits: int
) -> None:
    assert UPSTREAM_NEW_OFFSET(_consumer(committed, acked), EVENTS) == upstream_commits  # past a record not applied
    assert _new_offset(_consumer(committed, acked), EVENTS) is None
    assert _new_offset(_consumer(committed=None, acked=[1, 2]), EVENTS) == 3  # upstream: nothing committed yet


def test_repeated_and_already_committed_offsets_do_not_hold_commits_back() -> None:
    # A gap-filled offset acknowledged again split the run: one offset committed per interval.
    acked = [407, 408, 408, 409, 409, 410, 410]
    assert UPSTREAM_NEW_OFFSET(_consumer(committed=408, acked=acked), EVENTS) == 409
    assert _new_offset(_consumer(committed=408, acked=acked), EVENTS) == 411


def test_jumps_count_as_compaction_gaps_only_on_compacted_topics() -> None:
    settings = Settings(topic_prefix="fixes.")
    faust_fixes.apply(compacted=compacted_topics(settings))
    events, states = TP(settings.topic("snapshots"), 0), TP(settings.topic("thread-state"), 0)

    def after_jump(add_gap: Any, tp: TP) -> int | None:
        consumer = _consumer(committed=10, acked=[])
        consumer._committed_offset[tp] = 10
        consumer._acked[tp] = [10, 15]
        asyncio.run(add_gap(consumer, tp, 11, 14))  # a record at 15 read right after 10
        return _new_offset(consumer, tp)

    assert after_jump(_add_gap, states) == 16  # 11-14 were compacted away
    assert after_jump(_add_gap, events) == 11  # 11-14 were fetched before a seek back and never applied
    assert after_jump(UPSTREAM["_add_gap"], events) == 16  # upstream: committed past them


def test_a_record_the_stream_skipped_is_not_acknowledged() -> None:
    """The stream skips (and acknowledges) a record it dequeues during a rebalance without ever tracking it."""
    skipped = ConsumerMessage(EVENTS.topic, EVENTS.partition, 10, 0.0, 0, None, b"k", b"v", None, tp=EVENTS)
    assert not skipped.tracked
    upstream = _consumer(committed=10, acked=[])
    assert UPSTREAM["ack"](upstream, skipped) is True
    assert UPSTREAM_NEW_OFFSET(upstream, EVENTS) == 11  # committed, never applied
    skipped.acked = False
    patched = _consumer(committed=10, acked=[])
    assert faust_fixes._ack(patched, skipped) is False
    assert _new_offset(patched, EVENTS) is None


def _revoking(unacked: set[object]) -> Any:
    """What `wait_empty` uses of the consumer during a revocation, with records that are never acknowledged."""
    calls: list[str] = []

    async def record(name: str) -> None:
        calls.append(name)

    async def wait_for_ack(timeout: float) -> None:  # noqa: ASYNC109 - upstream calls it so
        await asyncio.sleep(0.01)

    return SimpleNamespace(
        should_stop=False,
        _unacked_messages=unacked,
        commit=lambda: record("commit"),
        _wait_for_ack=wait_for_ack,
        _clean_unacked_messages=lambda: None,
        commit_and_end_transactions=lambda: record("final commit"),
        diag=SimpleNamespace(set_flag=lambda flag: None, unset_flag=lambda flag: None),
        log=SimpleNamespace(dev=lambda *a: None, warning=lambda *a: None, info=lambda *a: None),
        app=SimpleNamespace(agents=SimpleNamespace(human_tracebacks=lambda: "")),
        calls=calls,
    )


async def test_a_revocation_waits_a_bounded_time_for_a_record_no_agent_will_acknowledge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One copy of a record two agents share was dropped by the revocation's flow-control clear: upstream waits for
    its acknowledgement for ever; the correction gives up after WAIT_EMPTY_SECONDS, leaving it uncommitted."""
    upstream = _revoking({object()})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(UPSTREAM["wait_empty"](upstream), 0.3)
    assert "final commit" not in upstream.calls

    monkeypatch.setattr(faust_fixes, "WAIT_EMPTY_SECONDS", 0.05)
    patched = _revoking({object()})
    await asyncio.wait_for(faust_fixes._wait_empty(patched), 1)
    assert patched._unacked_messages == set()
    assert patched.calls[-1] == "final commit"


def test_topics_read_through_the_intake_commit_the_reported_positions() -> None:
    consumer = _consumer(committed=10, acked=[10, 11, 12])
    consumer.app.consumer_generation_id = 3
    progress = faust_fixes.track_progress(consumer.app)
    progress.register("engine", [EVENTS.topic])
    assert UPSTREAM_NEW_OFFSET(_consumer(committed=10, acked=[10, 11, 12]), EVENTS) == 13  # upstream: acks commit
    assert _new_offset(consumer, EVENTS) is None  # acknowledged, but not reported applied
    progress.done("engine", 3, EVENTS, 12)
    assert _new_offset(consumer, EVENTS) == 12
    assert _new_offset(consumer, STATES) == 13  # not registered: by acknowledgements


def test_a_partition_with_a_reported_position_and_no_acknowledgement_is_committed() -> None:
    """A reader reports past a hole the sequencer gave up on: nothing was acknowledged, yet the position moved."""
    consumer = _consumer(committed=10, acked=[])
    consumer._acked.clear()
    consumer.app.consumer_generation_id = 1
    progress = faust_fixes.track_progress(consumer.app)
    progress.register("engine", [EVENTS.topic])
    progress.done("engine", 1, EVENTS, 14)
    assert list(UPSTREAM["_filter_tps_with_pending_acks"](consumer)) == []  # upstream: never looked at
    assert list(faust_fixes._pending(consumer)) == [EVENTS]
