"""The commit bookkeeping Faust's consumer is patched with (streams/runtime/faust_fixes.py), on its data structures."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from faust.types import TP
from intervaltree import IntervalTree

from core.settings import Settings
from core.topics import compacted_topics
from streams.runtime import faust_fixes
from streams.runtime.faust_fixes import _add_gap, _new_offset

EVENTS = TP("ctx.snapshots", 0)
STATES = TP("ctx.thread-state", 0)


class _App:
    """An app no progress is tracked for: these topics commit by acknowledgements."""


def _consumer(committed: int | None, acked: list[int]) -> Any:
    consumer = SimpleNamespace(
        app=_App(),
        _acked=defaultdict(list),
        _acked_index=defaultdict(set),
        _gap=defaultdict(IntervalTree),
        _committed_offset=defaultdict(lambda: None),
    )
    for tp in (EVENTS, STATES):
        consumer._committed_offset[tp] = committed
        consumer._acked[tp] = list(acked)
        consumer._acked_index[tp] = set(acked)
    return consumer


def test_commits_stop_at_the_first_offset_not_acknowledged() -> None:
    consumer = _consumer(committed=10, acked=[10, 11, 13])
    assert _new_offset(consumer, EVENTS) == 12
    consumer._committed_offset[EVENTS] = 12
    assert _new_offset(consumer, EVENTS) is None  # 12 is still owed


def test_the_record_at_the_committed_offset_must_be_acknowledged_too() -> None:
    assert _new_offset(_consumer(committed=10, acked=[11, 12]), EVENTS) is None
    assert _new_offset(_consumer(committed=None, acked=[1, 2]), EVENTS) == 3  # upstream: nothing committed yet


def test_repeated_and_already_committed_offsets_do_not_hold_commits_back() -> None:
    # A gap-filled offset acknowledged again used to split the run: one offset committed per interval.
    consumer = _consumer(committed=408, acked=[407, 408, 408, 409, 409, 410, 410])
    assert _new_offset(consumer, EVENTS) == 411


def test_jumps_count_as_compaction_gaps_only_on_compacted_topics() -> None:
    settings = Settings(topic_prefix="fixes.")
    faust_fixes.apply(compacted=compacted_topics(settings))
    events, states = TP(settings.topic("snapshots"), 0), TP(settings.topic("thread-state"), 0)
    consumer = _consumer(committed=10, acked=[])
    for tp in (events, states):
        consumer._committed_offset[tp] = 10
        consumer._acked[tp] = [10, 15]
        asyncio.run(_add_gap(consumer, tp, 11, 14))  # a record at 15 read right after 10
    assert _new_offset(consumer, states) == 16  # 11-14 were compacted away
    assert _new_offset(consumer, events) == 11  # 11-14 were fetched before a seek back and never applied


def test_topics_read_through_the_intake_commit_the_reported_positions() -> None:
    consumer = _consumer(committed=10, acked=[10, 11, 12])
    consumer.app.consumer_generation_id = 3
    progress = faust_fixes.track_progress(consumer.app)
    progress.register("engine", [EVENTS.topic])
    assert _new_offset(consumer, EVENTS) is None  # acknowledged, but not reported applied
    progress.done("engine", 3, EVENTS, 12)
    assert _new_offset(consumer, EVENTS) == 12
    assert _new_offset(consumer, STATES) == 13  # not registered: by acknowledgements
