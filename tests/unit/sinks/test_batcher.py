"""The per-partition batcher: cuts at N records or T ms, tokens from offsets, identical cuts when replaying a plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sinks.batcher import Batcher, Flush
from sinks.tables import (
    ALERT_TRANSITIONS,
    ROUTES,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_LATEST,
    THREAD_HANDOFF_PACKAGES,
)
from tests.unit.sinks.records import engine_outputs

OUTPUTS = engine_outputs()
ALERTS = OUTPUTS["alerts"]


class Clock:
    def __init__(self) -> None:
        self.seconds = 100.0

    def __call__(self) -> float:
        return self.seconds


def alerts_batcher(**kwargs) -> Batcher:
    return Batcher(ROUTES["alerts"], "ctx.alerts", 2, **kwargs)


def feed(batcher: Batcher, offsets: list[int]) -> list[Flush]:
    return [f for i, offset in enumerate(offsets) for f in batcher.add(offset, ALERTS[i % len(ALERTS)])]


def test_flushes_at_max_rows_with_a_token_per_table_from_the_offset_range() -> None:
    batcher = alerts_batcher(max_rows=3)
    assert feed(batcher, [10, 11]) == []
    (flush,) = feed(batcher, [12])
    assert (flush.topic, flush.partition, flush.first_offset, flush.last_offset) == ("ctx.alerts", 2, 10, 12)
    assert [b.table for b in flush.batches] == [THREAD_CONTEXT_ALERTS, ALERT_TRANSITIONS]
    assert [b.token for b in flush.batches] == [
        "thread_context_alerts:ctx.alerts:2:10-12",
        "alert_transitions:ctx.alerts:2:10-12",
    ]
    assert all(len(b.rows) == 3 for b in flush.batches)
    assert batcher.flush() == []


def test_flushes_after_max_ms_from_the_first_pending_record() -> None:
    clock = Clock()
    batcher = alerts_batcher(max_rows=1000, max_ms=500, clock=clock)
    feed(batcher, [0])
    clock.seconds += 0.3
    feed(batcher, [1])
    clock.seconds += 0.199
    assert batcher.due() == []
    clock.seconds += 0.001
    (flush,) = batcher.due()
    assert (flush.first_offset, flush.last_offset) == (0, 1)
    assert batcher.due() == []  # nothing pending: no empty flush


def test_latest_state_rows_carry_the_offset_as_version_and_tables_skip_records_without_a_part() -> None:
    states = OUTPUTS["thread-state"]
    batcher = Batcher(ROUTES["thread-state"], "ctx.thread-state", 0, max_rows=len(states))
    (flush,) = [f for offset, s in enumerate(states, start=40) for f in batcher.add(offset, s)]
    latest, packages = flush.batches
    assert latest.table is THREAD_CONTEXT_LATEST
    assert [row[-1] for row in latest.rows] == list(range(40, 40 + len(states)))
    assert packages.table is THREAD_HANDOFF_PACKAGES
    assert len(packages.rows) == sum(s.handoff is not None for s in states) < len(states)


def test_a_replayed_plan_is_cut_exactly_as_before_whatever_the_limits() -> None:
    clock = Clock()
    batcher = alerts_batcher(max_rows=2, max_ms=10, planned=[(5, 9), (10, 10)], clock=clock)
    assert feed(batcher, [5, 6, 7]) == []  # inside a planned range: neither N ...
    clock.seconds += 60
    assert batcher.due() == []  # ... nor T cuts it
    (first,) = feed(batcher, [9])
    (second,) = feed(batcher, [10])
    assert [(f.first_offset, f.last_offset) for f in (first, second)] == [(5, 9), (10, 10)]
    third = feed(batcher, [11, 12])  # past the plan: the limits apply again
    assert [(f.first_offset, f.last_offset) for f in third] == [(11, 12)]


def test_a_planned_range_whose_last_record_was_compacted_away_is_cut_where_it_ended() -> None:
    batcher = alerts_batcher(max_rows=100, planned=[(5, 9)])
    flushes = feed(batcher, [5, 7, 12])
    assert [(f.first_offset, f.last_offset) for f in flushes] == [(5, 7)]
    assert [(f.first_offset, f.last_offset) for f in batcher.flush()] == [(12, 12)]


def test_an_unplanned_batch_stops_where_a_planned_range_begins() -> None:
    batcher = alerts_batcher(max_rows=100, planned=[(8, 9)])
    flushes = feed(batcher, [6, 7, 8, 9])
    assert [(f.first_offset, f.last_offset) for f in flushes] == [(6, 7), (8, 9)]


@given(st.lists(st.integers(1, 5), min_size=1, max_size=30), st.integers(1, 7))
def test_a_replay_guided_by_the_first_runs_plan_rebuilds_the_same_tokens(gaps: list[int], max_rows: int) -> None:
    offsets = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    first = alerts_batcher(max_rows=max_rows)
    cut = feed(first, offsets) + first.flush()
    replay = alerts_batcher(max_rows=1000, planned=[(f.first_offset, f.last_offset) for f in cut])
    again = feed(replay, offsets) + replay.flush()
    assert [b.token for f in again for b in f.batches] == [b.token for f in cut for b in f.batches]
    assert [b.rows for f in again for b in f.batches] == [b.rows for f in cut for b in f.batches]


@pytest.mark.parametrize("limits", [{"max_rows": 0}, {"max_ms": 0}])
def test_limits_must_be_positive(limits: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="max_rows"):
        alerts_batcher(**limits)
