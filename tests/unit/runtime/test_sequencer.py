"""The sequencer lets the fold see each partition's records in offset order from the committed offset, none missing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.sequencer import Admit, Sequencer, Survey


def _sequencer(committed: dict[str, int] | None = None, **kwargs: float) -> Sequencer[str]:
    sequencer: Sequencer[str] = Sequencer(committed=(committed or {}).get, **kwargs)
    sequencer.start(1)
    return sequencer


def test_records_from_the_committed_offset_apply_in_order() -> None:
    sequencer = _sequencer({"p0": 5})
    assert [sequencer.admit("p0", o) for o in (5, 6, 7)] == [Admit.APPLY] * 3


def test_records_below_the_committed_offset_are_duplicates() -> None:
    sequencer = _sequencer({"p0": 5})
    assert sequencer.admit("p0", 4) is Admit.DUPLICATE


def test_a_partition_never_committed_starts_at_offset_zero() -> None:
    sequencer = _sequencer()
    assert sequencer.admit("p0", 3) is Admit.AHEAD
    assert sequencer.rewinds(now=0.0) == {"p0": 0}


def test_a_record_past_a_hole_is_held_back_and_the_partition_rewound_to_the_hole() -> None:
    sequencer = _sequencer({"p0": 348})
    assert sequencer.admit("p0", 349) is Admit.AHEAD  # 348 was skipped by the consumer
    assert sequencer.rewinds(now=10.0) == {"p0": 348}
    assert sequencer.admit("p0", 350) is Admit.AHEAD  # leftovers queued before the rewind
    assert [sequencer.admit("p0", o) for o in (348, 349, 350)] == [Admit.APPLY] * 3
    assert sequencer.rewinds(now=20.0) == {}


def test_rewinds_of_one_hole_are_spaced_and_bounded_then_the_hole_is_accepted() -> None:
    sequencer = _sequencer({"p0": 0}, rewind_interval=2.0, max_rewinds=2)
    sequencer.admit("p0", 7)
    assert sequencer.rewinds(now=0.0) == {"p0": 0}
    assert sequencer.rewinds(now=1.0) == {}
    assert sequencer.rewinds(now=2.0) == {"p0": 0}
    assert sequencer.admit("p0", 7) is Admit.AHEAD
    assert sequencer.rewinds(now=4.0) == {}  # retries used up and waited for: the records are gone
    assert sequencer.admit("p0", 7) is Admit.APPLY
    assert sequencer.admit("p0", 8) is Admit.APPLY


def test_a_partition_whose_records_never_arrive_is_rewound_once_it_stalls() -> None:
    # Fetched, then dropped by the consumer before delivery: no later record reveals the gap.
    sequencer = _sequencer({"p0": 40}, stall_seconds=5.0)
    assert sequencer.stalls(now=0.0, ends={"p0": 90}) == {}
    assert sequencer.stalls(now=4.0, ends={"p0": 90}) == {}
    assert sequencer.stalls(now=5.0, ends={"p0": 90}) == {"p0": 40}
    assert sequencer.stalls(now=6.0, ends={"p0": 90}) == {}  # the next rewind waits a whole period again
    assert sequencer.stalls(now=10.0, ends={"p0": 90}) == {"p0": 40}


def test_a_partition_that_advances_or_owes_nothing_is_not_stalled() -> None:
    sequencer = _sequencer({"p0": 40, "p1": 7}, stall_seconds=5.0)
    sequencer.stalls(now=0.0, ends={"p0": 90, "p1": 7})
    for offset in range(40, 45):
        sequencer.admit("p0", offset)
    assert sequencer.stalls(now=5.0, ends={"p0": 90, "p1": 7}) == {}  # p0 moved, p1 is at its end
    assert sequencer.stalls(now=10.0, ends={"p0": 90, "p1": 7}) == {"p0": 45}


def test_a_stall_behind_a_known_gap_is_left_to_the_gap_rewinds() -> None:
    sequencer = _sequencer({"p0": 0}, stall_seconds=1.0)
    assert sequencer.admit("p0", 3) is Admit.AHEAD
    sequencer.stalls(now=0.0, ends={"p0": 9})
    assert sequencer.stalls(now=5.0, ends={"p0": 9}) == {}
    assert sequencer.rewinds(now=5.0) == {"p0": 0}


def test_partitions_are_independent() -> None:
    sequencer = _sequencer({"p0": 0, "p1": 0})
    assert sequencer.admit("p0", 1) is Admit.AHEAD
    assert sequencer.admit("p1", 0) is Admit.APPLY


def test_a_new_generation_starts_again_from_the_committed_offsets() -> None:
    committed = {"p0": 0}
    sequencer = _sequencer(committed)
    assert [sequencer.admit("p0", o) for o in (0, 1, 2)] == [Admit.APPLY] * 3
    committed["p0"] = 1  # another worker owned the partition meanwhile, or only 0 was committed
    sequencer.start(2)
    assert sequencer.admit("p0", 1) is Admit.APPLY


@given(st.permutations(range(12)), st.integers(min_value=0, max_value=11))
def test_whatever_the_delivery_order_applied_offsets_are_consecutive_from_the_committed_one(
    order: list[int], committed: int
) -> None:
    """Deliver a shuffled partition, then redeliver from each rewind: applied offsets are exactly committed..11."""
    sequencer = _sequencer({"p0": committed})
    applied: list[int] = []
    pending, clock = list(order), 0.0
    while pending:
        for offset in pending:
            if sequencer.admit("p0", offset) is Admit.APPLY:
                applied.append(offset)
        clock += 10
        rewind = sequencer.rewinds(clock).get("p0")
        pending = list(range(rewind, 12)) if rewind is not None else []
    assert applied == list(range(committed, 12))


def _compacted() -> Sequencer[str]:
    sequencer: Sequencer[str] = Sequencer(committed={"state-p0": 0}.get, compacted=lambda p: p.startswith("state"))
    sequencer.start(1)
    return sequencer


def test_a_compacted_topic_applies_past_holes_its_survey_shows() -> None:
    """Compaction removes superseded records; the broker says which offsets are gone."""
    sequencer = _compacted()
    assert sequencer.admit("state-p0", 0) is Admit.APPLY
    assert sequencer.admit("state-p0", 5) is Admit.AHEAD  # a hole, or records the consumer dropped?
    assert sequencer.surveys_due() == {"state-p0": (1, 5)}
    assert sequencer.rewinds(now=0.0) == {}  # no rewind before the survey answers
    sequencer.surveyed("state-p0", Survey(first=1, last=40, existing=(5, 9, 12, 40)))
    assert sequencer.surveys_due() == {}
    assert sequencer.rewinds(now=0.0) == {"state-p0": 1}  # deliver the held-back record again
    assert [sequencer.admit("state-p0", o) for o in (5, 9, 12)] == [Admit.APPLY] * 3  # holes: applied at once
    assert sequencer.admit("state-p0", 7) is Admit.DUPLICATE


def test_a_jump_over_records_that_exist_on_a_compacted_topic_is_a_gap() -> None:
    sequencer = _compacted()
    sequencer.surveyed("state-p0", Survey(first=0, last=40, existing=(0, 3, 5)))
    assert sequencer.admit("state-p0", 0) is Admit.APPLY
    assert sequencer.admit("state-p0", 5) is Admit.AHEAD  # 3 exists: the consumer dropped it
    assert sequencer.surveys_due() == {}
    assert sequencer.rewinds(now=0.0) == {"state-p0": 1}
    assert [sequencer.admit("state-p0", o) for o in (3, 5)] == [Admit.APPLY] * 2


def test_a_survey_answers_only_for_the_offsets_it_read() -> None:
    survey = Survey(first=10, last=20, existing=(10, 14, 20))
    assert survey.hole(11, 14) is True
    assert survey.hole(11, 15) is False
    assert survey.hole(9, 14) is None
    assert survey.hole(15, 22) is None
