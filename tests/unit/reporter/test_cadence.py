from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.profiles import TokenUsage
from core.snapshot_identity import snapshot_version
from reporter.cadence import Cadence
from reporter.readings import Reading
from schemas import ContextBudgetLevel, SourceKind

T0 = datetime(2026, 3, 25, 7, 0, tzinfo=UTC)
SAFE, WATCH, CRITICAL = ContextBudgetLevel.SAFE, ContextBudgetLevel.WATCH, ContextBudgetLevel.CRITICAL


def _reading(position: int, at: datetime, compactions: int = 0) -> Reading:
    return Reading("t", SourceKind.CODEX_APP_SERVER, position, at, TokenUsage(50_000), 258_400, compactions)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _send_due(cadence: Cadence, now: datetime, answer: int | None = None) -> list[tuple[int, int]]:
    """(position, resend) of what was due and is now sent."""
    due = cadence.due(now)
    for item in due:
        cadence.sent(item, now, answer)
    return [(o.reading.position, o.resend) for o in due]


def test_first_reading_goes_out_at_once() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    assert _send_due(cadence, T0) == [(1, 0)]


def test_nothing_new_is_resent_every_interval_of_the_level() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), WATCH, T0)
    _send_due(cadence, T0)
    assert _send_due(cadence, _at(14.9)) == []
    assert _send_due(cadence, _at(15)) == [(1, 1)]
    assert cadence.next_due() == _at(30)
    resent = cadence.due(_at(30))
    assert resent[0].captured_at == _at(30)


def test_a_reading_in_the_same_level_waits_for_the_due_time() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)
    cadence.observe(_reading(2, _at(3)), SAFE, _at(3))
    assert _send_due(cadence, _at(3)) == []
    assert _send_due(cadence, _at(30)) == [(2, 0)]  # the new reading itself, not a re-send


def test_a_level_change_or_a_compaction_goes_out_at_once() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)
    cadence.observe(_reading(2, _at(3)), CRITICAL, _at(3))
    assert _send_due(cadence, _at(3)) == [(2, 0)]
    cadence.observe(_reading(3, _at(4), compactions=1), CRITICAL, _at(4))
    assert _send_due(cadence, _at(4)) == [(3, 0)]


def test_a_must_finish_change_goes_out_at_once_under_a_new_version() -> None:
    cadence = Cadence()
    reading = _reading(1, T0)
    cadence.observe(reading, SAFE, T0)
    _send_due(cadence, T0)
    cadence.observe(replace(reading, must_finish=True), SAFE, _at(2))
    assert _send_due(cadence, _at(2)) == [(1, 1)]


def test_the_engines_answer_sets_the_interval() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0, answer=5)  # the engine judges the thread urgent
    assert cadence.next_due() == _at(5)


def test_an_idle_thread_stops_being_resent() -> None:
    cadence = Cadence(idle_after=timedelta(seconds=60))
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)
    assert _send_due(cadence, _at(30)) == [(1, 1)]
    assert _send_due(cadence, _at(60)) == [(1, 2)]
    assert cadence.next_due() is None


def test_a_reading_superseded_in_flight_stays_due() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    [first] = cadence.due(T0)
    cadence.observe(_reading(2, _at(1)), SAFE, _at(1))
    cadence.sent(first, _at(1))
    assert _send_due(cadence, _at(1)) == [(2, 0)]


def test_unsent_readings_are_flushed_when_the_input_ends() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)
    cadence.observe(_reading(2, _at(1)), SAFE, _at(1))
    assert [(o.reading.position, o.resend) for o in cadence.unsent(_at(1))] == [(2, 0)]


def test_most_severe_threads_go_first() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    cadence.observe(replace(_reading(1, T0), thread_id="u"), CRITICAL, T0)
    assert [o.reading.thread_id for o in cadence.due(T0)] == ["u", "t"]


def test_an_answer_sets_the_interval_only_for_the_last_snapshot_sent() -> None:
    cadence = Cadence()
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)
    cadence.observe(_reading(2, _at(1)), SAFE, _at(1))
    _send_due(cadence, _at(31))
    key = ("t", SourceKind.CODEX_APP_SERVER)
    cadence.answered(key, snapshot_version(1), 5)  # a late answer to the first snapshot: says nothing now
    assert cadence.next_due() == _at(61)
    cadence.answered(key, snapshot_version(2), 5)
    assert cadence.next_due() == _at(36)


def test_an_answered_interval_holds_for_later_sends_until_the_level_changes() -> None:
    cadence = Cadence()
    key = ("t", SourceKind.CODEX_APP_SERVER)
    cadence.observe(_reading(1, T0), SAFE, T0)
    _send_due(cadence, T0)  # through a spool: no answer yet
    cadence.answered(key, snapshot_version(1), 5)  # the engine, under a strict policy: report every 5 s
    assert _send_due(cadence, _at(5)) == [(1, 1)]
    assert cadence.next_due() == _at(10)  # the re-send has no answer yet: the engine's 5 s still hold, not 30 s
    cadence.observe(_reading(2, _at(6)), CRITICAL, _at(6))
    _send_due(cadence, _at(6))
    assert cadence.next_due() == _at(11)  # a new level: spec 5.1's interval for it until the engine answers


def test_idleness_counts_from_the_time_of_the_reading_not_from_when_it_was_read() -> None:
    cadence = Cadence(idle_after=timedelta(minutes=30))
    old = _reading(1, T0 - timedelta(hours=2))  # a past session's last line, read now
    cadence.observe(old, SAFE, T0)
    [first] = cadence.due(T0)
    assert (first.resend, first.captured_at) == (0, None)  # the snapshot carries the line's own time
    cadence.sent(first, T0)
    assert cadence.next_due() is None  # not re-sent under the reporter's clock: the engine lets it go stale
    recent = _reading(2, T0 - timedelta(minutes=29))
    cadence.observe(recent, SAFE, T0)
    assert _send_due(cadence, _at(30)) == [(2, 0)]
    assert _send_due(cadence, _at(60)) == [(2, 1)]
    assert cadence.next_due() is None  # its idle window, from its own time, ends a minute after it was read


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["observe", "deliver", "fail", "answer"]),
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from([SAFE, WATCH, CRITICAL]),
            st.integers(min_value=0, max_value=40),
        ),
        max_size=40,
    )
)
def test_the_due_index_agrees_with_every_threads_own_due_time(steps: list[tuple[str, str, Any, int]]) -> None:
    """A round looks only at the indexed due times: after any sequence of readings, deliveries, failed deliveries
    and late answers, they are what each thread's state says, and `due` names exactly the threads due."""
    cadence, now, position = Cadence(), T0, 0
    for op, thread, level, seconds in steps:
        now += timedelta(seconds=seconds)
        if op == "observe":
            position += 1
            reading = replace(_reading(position, now), thread_id=thread)
            cadence.observe(reading, level, now)
        elif op in ("deliver", "fail"):
            for item in cadence.due(now):
                if op == "deliver":
                    cadence.sent(item, now, None)
        elif (latest := cadence.latest(thread, SourceKind.CODEX_APP_SERVER)) is not None:
            sent = cadence._threads[(thread, SourceKind.CODEX_APP_SERVER)].sent_resend
            cadence.answered((thread, SourceKind.CODEX_APP_SERVER), snapshot_version(latest.position, sent or 0), 5)
        own = {key: t.due_at(cadence.idle_after) for key, t in cadence._threads.items()}
        assert cadence.next_due() == min((at for at in own.values() if at is not None), default=None)
        expected = sorted(key[0] for key, at in own.items() if at is not None and at <= now)
        assert sorted(o.reading.thread_id for o in cadence.due(now)) == expected
