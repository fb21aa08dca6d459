"""The deadline index the keyed folds' timers and the reporter's cadence wake by: keys come out once their instant has
passed, earliest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.deadlines import DeadlineIndex

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_keys_come_out_once_their_deadline_has_passed_earliest_first() -> None:
    index: DeadlineIndex[str] = DeadlineIndex()
    index.set("late", at(30))
    index.set("early", at(10))
    index.set("never", None)
    assert index.due(at(9)) == []
    assert index.due(at(30)) == ["early", "late"]
    assert index.due(at(99)) == []  # out until set again
    assert len(index) == 0


def test_setting_a_key_again_replaces_its_deadline() -> None:
    index: DeadlineIndex[str] = DeadlineIndex()
    index.set("a", at(10))
    index.set("a", at(50))
    assert index.due(at(20)) == []
    index.set("b", at(5))
    index.set("b", None)  # time alone no longer changes it
    assert index.due(at(60)) == ["a"]


def test_a_key_moved_back_and_forth_comes_out_once() -> None:
    index: DeadlineIndex[str] = DeadlineIndex()
    for when in (10, 20, 10, 20, 10):
        index.set("a", at(when))
    assert index.due(at(100)) == ["a"]


def test_many_superseded_deadlines_do_not_pile_up() -> None:
    index: DeadlineIndex[int] = DeadlineIndex()
    for step in range(10_000):
        index.set(step % 10, at(step))
    assert len(index._heap) <= 2 * len(index) + 65
    assert index.due(at(9_990)) == [0]  # the last of each key: 9_990 for key 0
    assert sorted(index.due(at(10_000))) == list(range(1, 10))


def test_the_earliest_deadline_is_the_first_current_one() -> None:
    index: DeadlineIndex[str] = DeadlineIndex()
    assert index.earliest() is None
    index.set("a", at(10))
    index.set("b", at(20))
    index.set("a", at(30))  # superseded: its entry at 10 is no deadline any more
    assert index.earliest() == at(20)
    index.set("b", None)
    assert index.earliest() == at(30)
    assert index.due(at(30)) == ["a"]
    assert index.earliest() is None
