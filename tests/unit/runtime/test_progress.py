"""The group commits, per partition, the lowest position every agent reading it reported in this generation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.progress import Progress

P0, P1 = ("events", 0), ("events", 1)


def _progress() -> Progress[tuple[str, int]]:
    progress: Progress[tuple[str, int]] = Progress(topic_of=lambda tp: tp[0])
    progress.register("engine", ["events", "packages"])
    progress.register("sink", ["events", "outputs"])
    return progress


def test_the_commit_waits_for_every_reader_of_the_topic() -> None:
    progress = _progress()
    progress.done("engine", 1, P0, 120)
    assert progress.committable(P0, 1) is None  # the sink has not reported: hold at the committed offset
    progress.done("sink", 1, P0, 80)
    assert progress.committable(P0, 1) == 80
    progress.done("sink", 1, P0, 150)
    assert progress.committable(P0, 1) == 120
    assert progress.committable(P1, 1) is None


def test_a_topic_with_one_reader_commits_its_position() -> None:
    progress = _progress()
    progress.done("engine", 1, ("packages", 0), 7)
    assert progress.committable(("packages", 0), 1) == 7
    assert progress.handles("packages")
    assert not progress.handles("policies")


def test_positions_never_move_back() -> None:
    progress = _progress()
    for reader in ("engine", "sink"):
        progress.done(reader, 1, P0, 50)
    progress.done("engine", 1, P0, 30)  # a replay from the committed offset after a rewind
    assert progress.committable(P0, 1) == 50


def test_a_new_generation_starts_without_positions_and_late_reports_of_the_old_one_are_ignored() -> None:
    progress = _progress()
    for reader in ("engine", "sink"):
        progress.done(reader, 1, P0, 50)
    assert progress.committable(P0, 2) is None  # the consumer moved on: nothing reported for generation 2 yet
    progress.done("engine", 2, P0, 60)
    progress.done("sink", 1, P0, 90)  # a batch of generation 1 finishing late
    progress.done("sink", None, P0, 90)  # a reader that dropped its generation
    assert progress.committable(P0, 2) is None
    assert set(progress.partitions()) == {P0}


@given(st.lists(st.tuples(st.sampled_from(["engine", "sink"]), st.integers(0, 1000)), max_size=40))
def test_the_commit_is_never_past_what_a_reader_reported(reports: list[tuple[str, int]]) -> None:
    progress = _progress()
    highest: dict[str, int] = {}
    for reader, offset in reports:
        progress.done(reader, 1, P0, offset)
        highest[reader] = max(highest.get(reader, -1), offset)
    committable = progress.committable(P0, 1)
    if len(highest) < 2:
        assert committable is None
    else:
        assert committable == min(highest.values())
