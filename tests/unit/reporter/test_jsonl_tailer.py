"""The shared tailer loop: how often positions are saved, what a crash between saves costs, which files a poll opens."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.profiles import DEFAULT_CODEX_VERSION
from reporter import jsonl_tailer
from reporter.claude_code.transcripts import TranscriptTailer
from reporter.codex.rollouts import RolloutTailer
from reporter.file_watch import InotifyWatch
from reporter.jsonl_tailer import SAVE_EVENTS, SAVE_SECONDS
from reporter.readings import SKIP_LOG_SECONDS, Reading, SkipLog, to_snapshot
from streams.projection.config import ProjectionConfig
from tests.unit.reporter.claude_code.test_transcripts import AUTO, AUTO_SESSION, IDENTITY, _project
from tests.unit.reporter.codex.test_rollouts import ROLLOUT_FILE

DATA = Path(__file__).parents[2] / "data"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _identities(readings: list[Reading]) -> list[tuple[str, int]]:
    snapshots = (to_snapshot(r, IDENTITY, DEFAULT_CODEX_VERSION) for r in readings)
    return [(s.snapshot_id, s.snapshot_version) for s in snapshots]


def _halves(source: Path, path: Path) -> bytes:
    """Write the first half of `source`'s lines to `path`; return the rest."""
    lines = source.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    return b"".join(lines[len(lines) // 2 :])


def test_positions_are_saved_at_most_every_save_seconds_and_when_the_reporter_stops(tmp_path: Path) -> None:
    clock, state = _Clock(), tmp_path / "state.json"
    rest = _halves(ROLLOUT_FILE, tmp_path / ROLLOUT_FILE.name)
    tailer = RolloutTailer(tmp_path, state, clock=clock)
    tailer.poll()
    tailer.commit()  # the first save is at once
    saved = state.read_bytes()
    with (tmp_path / ROLLOUT_FILE.name).open("ab") as handle:
        handle.write(rest)
    tailer.poll()
    clock.now += SAVE_SECONDS / 2
    tailer.commit()
    assert state.read_bytes() == saved
    clock.now += SAVE_SECONDS / 2
    tailer.commit()
    assert state.read_bytes() != saved
    assert RolloutTailer(tmp_path, state).poll() == []  # everything read was saved

    again = state.read_bytes()
    with (tmp_path / ROLLOUT_FILE.name).open("ab") as handle:
        handle.write(ROLLOUT_FILE.read_bytes().splitlines(keepends=True)[-1])
    tailer.poll()
    tailer.commit(final=True)
    assert state.read_bytes() != again


def test_a_thread_with_many_unsaved_events_is_saved_before_the_interval(tmp_path: Path) -> None:
    clock, state = _Clock(), tmp_path / "state.json"
    projects = _project(tmp_path, AUTO, AUTO_SESSION)
    path = next(projects.rglob("*.jsonl"))
    rest = _halves(AUTO, path)
    tailer = TranscriptTailer(projects, state, collect_events=True, clock=clock)
    tailer.poll()
    tailer.commit()
    saved = state.read_bytes()
    with path.open("ab") as handle:
        handle.write(
            rest * (SAVE_EVENTS // rest.count(b"\n") + 1)
        )  # more lines than SAVE_EVENTS, each an event or more
    tailer.poll()
    assert len(tailer.take_events()) >= SAVE_EVENTS
    tailer.commit()
    assert state.read_bytes() != saved


def test_a_crash_between_saves_re_reads_lines_into_the_same_ids_the_pipeline_drops(tmp_path: Path) -> None:
    """Nothing is skipped; what is derived again is a replay: the same event ids (the projection keeps the latest
    `dedupe_window` per thread, and a save comes before a thread has `SAVE_EVENTS` unsaved) and the same snapshot
    ids and versions (the engine admits only a newer version)."""
    assert ProjectionConfig().dedupe_window // 2 >= SAVE_EVENTS
    clock, state = _Clock(), tmp_path / "state.json"
    projects = _project(tmp_path, AUTO, AUTO_SESSION)
    path = next(projects.rglob("*.jsonl"))
    rest = _halves(AUTO, path)
    tailer = TranscriptTailer(projects, state, collect_events=True, clock=clock)
    tailer.poll()
    tailer.take_events()
    tailer.commit()
    with path.open("ab") as handle:
        handle.write(rest)
    readings = tailer.poll()
    events = tailer.take_events()
    tailer.commit()  # within SAVE_SECONDS: held back, and then the process dies
    assert readings
    assert events

    restarted = TranscriptTailer(projects, state, collect_events=True, clock=clock)
    again = restarted.poll()
    assert again == readings
    assert [e.event_id for e in restarted.take_events()] == [e.event_id for e in events]
    assert _identities(again) == _identities(readings)


def test_a_file_unchanged_since_its_last_read_is_not_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ROLLOUT_FILE.read_bytes().splitlines(keepends=True)
    path = tmp_path / ROLLOUT_FILE.name
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:10])  # ends in a line still being written
    tailer = RolloutTailer(tmp_path, tmp_path / "state.json")
    tailer.poll()
    opened: list[str] = []
    real_open = os.open

    def counting_open(name: str, *args: int) -> int:
        opened.append(name)
        return real_open(name, *args)

    monkeypatch.setattr(os, "open", counting_open)
    assert tailer.poll() == []
    assert opened == []
    with path.open("ab") as handle:
        handle.write(lines[-1][10:])
    assert len(tailer.poll()) <= 1
    assert opened == [str(path)]
    read = tailer.state_of(path)
    assert read is not None
    assert read.offset == len(ROLLOUT_FILE.read_bytes())


def test_lines_split_across_reads_are_parsed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = ROLLOUT_FILE.read_bytes()
    whole = tmp_path / "whole" / ROLLOUT_FILE.name
    whole.parent.mkdir()
    whole.write_bytes(data)
    expected = RolloutTailer(whole.parent, tmp_path / "whole.json", collect_events=True)
    readings = expected.poll()

    monkeypatch.setattr(jsonl_tailer, "READ_CHUNK", 7)  # every line spans several reads
    split = tmp_path / "split" / ROLLOUT_FILE.name
    split.parent.mkdir()
    split.write_bytes(data[:-5])  # the last line still being written
    tailer = RolloutTailer(split.parent, tmp_path / "split.json", collect_events=True)
    first = tailer.poll()
    assert tailer.state_of(split).offset == data.rstrip(b"\n").rfind(b"\n") + 1  # type: ignore[union-attr]
    with split.open("ab") as handle:
        handle.write(data[-5:])
    assert [*first, *tailer.poll()] == readings
    assert [e.event_id for e in tailer.take_events()] == [e.event_id for e in expected.take_events()]
    assert tailer.state_of(split).offset == len(data)  # type: ignore[union-attr]


@pytest.mark.parametrize("watch", [True, False])
def test_appended_lines_and_files_in_new_directories_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch: bool
) -> None:
    if watch and InotifyWatch.open() is None:
        pytest.skip("no inotify here")
    lines = ROLLOUT_FILE.read_bytes().splitlines(keepends=True)
    first = tmp_path / "2026" / "02" / "23" / ROLLOUT_FILE.name
    first.parent.mkdir(parents=True)
    first.write_bytes(b"".join(lines[:20]))
    tailer = RolloutTailer(tmp_path, tmp_path.parent / f"state-{watch}.json", watch=watch)
    tailer.poll()
    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path: str) -> Iterator[os.DirEntry[str]]:
        listed.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    with first.open("ab") as handle:
        handle.write(b"".join(lines[20:]))
    second = tmp_path / "2026" / "02" / "24" / ROLLOUT_FILE.name.replace("019c8bfe", "019c8bff")
    second.parent.mkdir()
    second.write_bytes(b"".join(lines))
    tailer.poll()
    assert tailer.state_of(first).offset == len(ROLLOUT_FILE.read_bytes())  # type: ignore[union-attr]
    assert tailer.state_of(second).offset == len(ROLLOUT_FILE.read_bytes())  # type: ignore[union-attr]
    if watch:  # the kernel said what changed: only the new directory was listed
        assert listed == [str(second.parent)]
    else:
        assert str(tmp_path) in listed


@pytest.mark.parametrize(
    "line",
    [
        b'{"usage": NaN}\n',  # this and the next three msgspec refuses and json.loads reads
        b'{"x": 1e400}\n',
        b'{"text": "\\ud800"}\n',
        b'\xef\xbb\xbf{"type": "user"}\n',
        b'{"a": 1, "a": 2.0, "b": true, "c": null, "d": [1, "\\u00e9", -0.0, 123456789012345678901234567890]}\n',
    ],
)
def test_decode_line_reads_a_line_as_json_loads_does(line: bytes) -> None:
    assert repr(jsonl_tailer.decode_line(line)) == repr(json.loads(line))  # repr: 1 is not 1.0 nor True, NaN is NaN


def test_decode_line_reads_every_recorded_transcript_and_rollout_line_as_json_loads_does() -> None:
    lines = [line for path in sorted(DATA.rglob("*.jsonl")) for line in path.read_bytes().splitlines(keepends=True)]
    assert len(lines) > 100
    assert [repr(jsonl_tailer.decode_line(line)) for line in lines] == [repr(json.loads(line)) for line in lines]


@pytest.mark.parametrize("line", [b"\n", b"{not json}\n", b'{"cut": "off\n'])
def test_decode_line_refuses_what_json_loads_refuses_with_its_error(line: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        jsonl_tailer.decode_line(line)


@pytest.mark.parametrize("watch", [True, False])
def test_a_fifo_named_jsonl_is_passed_over_and_does_not_hang_the_tailer(tmp_path: Path, watch: bool) -> None:
    """Issue 38.7: opening a FIFO for reading blocks until a writer comes; the reporter hung there for good."""
    if watch and InotifyWatch.open() is None:
        pytest.skip("no inotify here")
    projects = _project(tmp_path, AUTO, AUTO_SESSION)
    tailer = TranscriptTailer(projects, tmp_path / "state.json", watch=watch)
    assert tailer.poll()
    fifo = projects / "-Users-someone-code" / "trap.jsonl"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the child polls: a blocked open would leave it running past the wait below
        os._exit(0 if TranscriptTailer(projects, tmp_path / "other.json", watch=watch).poll() else 1)
    deadline = time.monotonic() + 10
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid, "the poll blocked on the FIFO"
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert tailer.poll() == []  # the watching tailer passes over it too
    assert tailer.state_of(fifo) is None


def test_garbage_lines_are_counted_whole_and_logged_rarely(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 38.7: 5 MB of random bytes in a transcript made 19,699 warnings."""
    clock = _Clock()
    projects = _project(tmp_path, AUTO, AUTO_SESSION)
    with (projects / "-Users-someone-code" / f"{AUTO_SESSION}.jsonl").open("ab") as handle:
        handle.write(b"".join(os.urandom(200).replace(b"\n", b" ") + b"\n" for _ in range(2_000)))
    tailer = TranscriptTailer(projects, tmp_path / "state.json")
    tailer.skipped = SkipLog(tailer.source, clock=clock)
    with caplog.at_level(logging.WARNING, logger="reporter.readings"):
        tailer.poll()
        clock.now += SKIP_LOG_SECONDS
        tailer.skipped.skip("malformed_line", "one more")
    assert tailer.skipped.counts == {"malformed_line": 2_001}
    assert [r.getMessage() for r in caplog.records][1] == (
        "claude code transcripts: skipped a line (malformed_line) (2000 since the last warning): one more"
    )
    assert len(caplog.records) == 2


def test_decode_line_says_json_nested_too_deeply_is_malformed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        jsonl_tailer.decode_line(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
