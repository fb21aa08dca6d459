"""The spec 8.1/8.2 priority order: a strict total order, blind to input order, with the issue's tie-break order."""

from __future__ import annotations

import random
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from schemas import WorkFact
from schemas.projects import LiveThread
from streams.aggregates.ranking import healthiest, next_compaction_risk, precedes, rank
from tests.unit.aggregates.builders import live

threads = st.builds(
    live,
    thread=st.sampled_from([f"thread-{c}" for c in "abcdefgh"]),
    level_pct=st.sampled_from([10.0, 30.0, 50.0, 80.0]),
    must_finish=st.booleans(),
    facts=st.sets(st.sampled_from(list(WorkFact)), max_size=3),
    expected_at=st.none() | st.integers(0, 3).map(float),
    importance=st.none() | st.integers(0, 2),
)
projects = st.lists(threads, max_size=8, unique_by=lambda t: t.summary.thread_id)


@given(threads, threads)
def test_of_two_different_threads_exactly_one_comes_first(a: LiveThread, b: LiveThread) -> None:
    assert not precedes(a, a)
    if a.summary.thread_id != b.summary.thread_id:
        assert precedes(a, b) != precedes(b, a)


@given(threads, threads, threads)
def test_order_is_transitive(a: LiveThread, b: LiveThread, c: LiveThread) -> None:
    if precedes(a, b) and precedes(b, c):
        assert precedes(a, c)


@given(projects, st.randoms(use_true_random=False))
def test_rank_does_not_depend_on_input_order(project: list[LiveThread], rnd: random.Random) -> None:
    shuffled = list(project)
    rnd.shuffle(shuffled)
    assert rank(shuffled) == rank(project)
    ranked = rank(project)
    assert all(precedes(x, y) for x, y in pairwise(ranked))


def test_tie_breaks_follow_the_spec_order() -> None:
    # ids run against the order, so each position is decided by its criterion and not by the id
    chain = [
        live("t-6-critical", 10),
        live("t-5-patch", 30, must_finish=True, facts=[WorkFact.UNCOMMITTED_PATCH]),
        live("t-4-tests", 30, must_finish=True, facts=[WorkFact.UNRECORDED_TEST_RESULTS]),
        live("t-3-hardware", 30, must_finish=True, facts=[WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP]),
        live("t-2-must-finish", 30, must_finish=True, facts=[WorkFact.UNRECORDED_DECISIONS]),
        live("t-1-nothing-held", 30),
    ]
    assert [t.summary.thread_id for t in rank(reversed(chain))] == [t.summary.thread_id for t in chain]
    later = [
        live("t-z-early", 30, expected_at=60),
        live("t-y-late", 30, expected_at=120),
        live("t-x-important", 30, importance=9),
        live("t-w-less-important", 30, importance=1),
        live("t-u-by-id", 30),
        live("t-v-by-id", 30),
    ]
    assert [t.summary.thread_id for t in rank(reversed(later))] == [t.summary.thread_id for t in later]


def test_severity_outranks_every_other_criterion() -> None:
    loaded = live("t-a", 30, must_finish=True, facts=list(WorkFact), expected_at=0, importance=1_000)
    assert precedes(live("t-z", 24.9), loaded)


def test_next_compaction_risk_is_the_first_urgent_or_critical_thread() -> None:
    ranked = rank([live("t-safe", 90), live("t-urgent", 30, must_finish=True), live("t-critical", 20)])
    assert next_compaction_risk(ranked).summary.thread_id == "t-critical"
    assert next_compaction_risk(rank([live("t-watch", 45), live("t-safe", 90)])) is None


def test_healthiest_is_the_fresh_safe_thread_with_most_room_and_nothing_to_save() -> None:
    project = [
        live("t-busy", 95, must_finish=True),
        live("t-stale", 99, stale=True),
        live("t-b", 70),
        live("t-a", 70),
        live("t-watch", 59),
    ]
    assert healthiest(project).summary.thread_id == "t-a"
    assert healthiest([live("t-watch", 59), live("t-critical", 3)]) is None


def test_expected_compaction_counts_to_the_minute_as_the_view_shows_it() -> None:
    # seconds apart inside one minute is a tie, decided by the next criterion (importance), not by the seconds
    sooner = live("t-a-sooner", 30, expected_at=61, importance=1)
    later = live("t-b-later", 30, expected_at=119, importance=5)
    assert [t.summary.thread_id for t in rank([sooner, later])] == ["t-b-later", "t-a-sooner"]
    assert precedes(live("t-z", 30, expected_at=119), live("t-a", 30, expected_at=120))


def test_healthiest_compares_room_by_the_ring_percent_a_reader_sees() -> None:
    assert healthiest([live("t-b", 70.9), live("t-a", 70.1)]).summary.thread_id == "t-a"
    assert healthiest([live("t-b", 71.0), live("t-a", 70.9)]).summary.thread_id == "t-b"
