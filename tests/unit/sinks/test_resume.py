"""Where a restarted sink picks a partition up: ranges inserted whole are skipped, the others rebuilt identically."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sinks.batcher import Batcher, Resume, resume
from sinks.tables import ROUTES
from tests.unit.sinks.records import engine_outputs

ALERTS = engine_outputs()["alerts"]


def test_a_range_the_commit_stopped_inside_was_inserted_whole() -> None:
    assert resume([(10, 20), (21, 25)], committed=16) == Resume(written_through=20, replay=[(21, 25)])


def test_a_range_starting_at_the_commit_is_rebuilt() -> None:
    assert resume([(21, 25), (16, 20)], committed=16) == Resume(written_through=15, replay=[(16, 20), (21, 25)])


def test_nothing_planned_resumes_at_the_commit() -> None:
    assert resume([], committed=0) == Resume(written_through=-1, replay=[])


def test_a_record_that_did_not_decode_writes_no_row_but_keeps_its_place_in_the_range() -> None:
    batcher = Batcher(ROUTES["alerts"], "ctx.alerts", 0, max_rows=3)
    flushes = batcher.add(7, ALERTS[0]) + batcher.add(8, None) + batcher.add(9, ALERTS[1])
    (flush,) = flushes
    assert (flush.first_offset, flush.last_offset) == (7, 9)
    assert [len(b.rows) for b in flush.batches] == [2, 2]
    assert flush.batches[0].token.endswith(":7-9")


@given(st.lists(st.integers(1, 4), min_size=2, max_size=20), st.data())
def test_resuming_anywhere_never_writes_an_offset_of_a_range_already_inserted(gaps: list[int], data) -> None:
    bounds = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    ranges = [(first + 1, last) for first, last in zip([-1, *bounds], bounds, strict=False)]
    committed = data.draw(st.integers(0, bounds[-1]))
    start = resume(ranges, committed)
    inserted = [(first, last) for first, last in ranges if first < committed]
    assert all(last <= start.written_through for _, last in inserted)
    assert all(first > start.written_through for first, _ in start.replay)
    assert sorted(inserted + start.replay) == ranges  # every range is either skipped or rebuilt
