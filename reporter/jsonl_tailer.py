"""What the Claude Code transcript tailer and the Codex rollout tailer share: reading new complete lines of every
`*.jsonl` under a directory from saved offsets, and handing on what each line yields.

A line yields a `LineResult`: the file's new state, maybe a reading, the session events it adds (seed 003's input),
and the shell commands it started and the results it carried, which feed the spec 4.2 `WorkFactTracker` of the
thread's working directory. One derivation for both tools: each tool only says how one of its lines reads.

`poll()` returns the readings of the lines read since the last poll. Where the kernel can say which files were
written (`reporter.file_watch`), only those are looked at, and the tree is listed again only every `SWEEP_SECONDS`;
else each poll lists each directory once. A file whose (inode, size, mtime) is what it was at its last read is not
opened. `commit()` saves the positions reached (the subclass's `save`) at most every `SAVE_SECONDS`, or sooner once
one thread has `SAVE_EVENTS` events unsaved: a crash re-reads the lines since, never skips one, and what they derive
again carries the same event ids and snapshot versions, which the pipeline drops. A file whose inode changed or that
shrank below its offset was replaced, and is read from its start. Only complete lines are consumed: a line still
being written is read once its newline arrives.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from stat import S_ISREG
from typing import Any, Generic, TypeVar

import msgspec
from pydantic import BaseModel, ConfigDict

from reporter.file_watch import InotifyWatch
from reporter.git_facts import WorkFactTracker
from reporter.readings import Reading, SkipLog
from schemas.copies import replaced
from schemas.session_events import SessionEvent

log = logging.getLogger(__name__)


class FileState(BaseModel):
    """What every tailed file's state has beside its tool's facts: where reading goes on in which file, and the
    thread's working directory (its git work tree)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    offset: int = 0
    inode: int | None = None
    cwd: str | None = None


S = TypeVar("S", bound=FileState)

SAVE_SECONDS = 5.0
"""Positions are saved at most this often: writing and fsyncing every file's state each round was most of the
reporter's work at hundreds of active files."""
SAVE_EVENTS = 64
"""...or as soon as one thread has this many session events past the saved position: half the projection's window of
recent event ids (`ProjectionConfig.dedupe_window`), so the events a crash derives again are all recognised."""
SWEEP_SECONDS = 30.0
"""Even with a file watch, the whole tree is listed this often: a write the kernel does not see (a network
filesystem's other clients) is still read."""
READ_CHUNK = 1 << 20
"""Bytes read at once: a poll's new lines fit in one read; a long transcript read from its start stays bounded."""
Signature = tuple[int, int, int]
"""(inode, size, mtime_ns) of a file as last read."""


@dataclass(frozen=True)
class LineResult(Generic[S]):
    state: S
    """The file's state after the line, its offset aside: the tailer sets that once per read, so a line that
    changes nothing else costs no copy."""
    reading: Reading | None = None
    automatic_compaction_at: int | None = None
    """Tokens at which an automatic compaction this line announced fired (a profile may learn it)."""
    events: tuple[SessionEvent, ...] = ()
    commands: tuple[tuple[str, str], ...] = ()
    """(call id, command) of shell commands the line started."""
    outcomes: tuple[tuple[str, bool], ...] = ()
    """(call id, failed) of commands the line says finished."""
    edits: bool = False
    """The line is a call of a file-editing tool (the work tree changes without a shell command)."""
    at: datetime | None = None
    """The line's own time: when its commands started."""


class JsonlTailer(Generic[S]):
    """The shared loop; a subclass names its source and says how a file starts and how one line reads."""

    source = "jsonl"

    def __init__(
        self,
        directory: Path,
        files: dict[str, S],
        collect_events: bool = False,
        facts: WorkFactTracker | None = None,
        clock: Callable[[], float] = time.monotonic,
        watch: bool = True,
    ) -> None:
        """`watch`: let the kernel say which files changed where it can (`reporter.file_watch`), else sweep."""
        self.directory = directory
        self.collect_events = collect_events
        self.facts = facts
        self.skipped = SkipLog(self.source)
        self.touched: set[str] = set()
        """Threads with lines read since the last `take_touched` (their work facts may have changed)."""
        self._files = files
        self._events: list[SessionEvent] = []
        self._unsaved = False
        """Lines were read since the last save."""
        self._unsaved_events: Counter[str] = Counter()
        """Session events per thread derived from lines past the saved positions."""
        self._clock = clock
        self._saved_at: float | None = None
        self._seen: dict[str, Signature] = {}
        self._watch = InotifyWatch.open() if watch else None
        self._swept_at: float | None = None
        """When the last sweep that watched the directory ran (None: the next poll sweeps)."""

    def fresh_state(self, path: Path, inode: int) -> S:
        raise NotImplementedError

    def parse_line(self, state: S, line: bytes, end_offset: int) -> LineResult[S]:
        raise NotImplementedError

    def thread_of(self, state: S) -> str | None:
        raise NotImplementedError

    def reading_of(self, state: S) -> Reading | None:
        raise NotImplementedError

    def derived(self, reading: Reading | None) -> Reading | None:
        """The reading, marked `events_derived` when the tailer says the thread's compactions itself (so the reporter
        does not say them a second time)."""
        return replace(reading, events_derived=True) if reading is not None and self.collect_events else reading

    def observed(self, result: LineResult[S]) -> None:
        """A line was read (a subclass may learn from it)."""

    def includes(self, path: Path) -> bool:
        return True

    def restored(self) -> list[Reading]:
        """Each known thread's latest reading, to resume the cadence after a restart (a re-send of one already
        delivered carries the same id and version, so the engine drops it)."""
        return [r for r in (self.reading_of(s) for s in self._files.values()) if r is not None]

    def state_of(self, path: Path) -> S | None:
        return self._files.get(str(path))

    def poll(self) -> list[Reading]:
        readings: list[Reading] = []
        for key, stat in sorted(self._changed()):
            if key in self._files or self.includes(Path(key)):  # a file read before was included
                readings.extend(self._read_file(key, stat))
            else:
                self._seen[key] = _signature(stat)
        return readings

    def _changed(self) -> Iterator[tuple[str, os.stat_result]]:
        """Every `*.jsonl` under the directory not seen as it is now. Watched: the files the kernel says were written
        (a `stat` each), and a sweep of the directories made since; else, or after an overflow, or every
        `SWEEP_SECONDS`, a sweep of the whole tree."""
        now = self._clock()
        if self._watch is not None:
            changes = self._watch.read()
            if not changes.overflow and self._swept_at is not None and now - self._swept_at < SWEEP_SECONDS:
                for folder in changes.directories:
                    yield from self._sweep(folder)
                for path in changes.files:
                    stat = _stat(path) if path.endswith(".jsonl") else None
                    if stat is not None and self._seen.get(path) != _signature(stat):
                        yield path, stat
                return
        top = str(self.directory)
        self._swept_at = now if self._watch is not None and os.path.isdir(top) else None
        yield from self._sweep(top)

    def _sweep(self, top: str) -> Iterator[tuple[str, os.stat_result]]:
        """Every `*.jsonl` under `top` not seen as it is now: one listing per directory (watched first, so a file
        written while it is listed is told), one `stat` per file."""
        folders = [top]
        while folders:
            folder = folders.pop()
            self._watch_folder(folder)
            try:
                entries = list(os.scandir(folder))
            except OSError:  # a folder that vanished since it was listed
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.name.endswith(".jsonl"):
                        stat = entry.stat()
                        if self._seen.get(entry.path) != _signature(stat):
                            yield entry.path, stat
                except OSError as error:
                    log.warning("%s: cannot read %s: %s", self.source, entry.path, error)

    def _watch_folder(self, folder: str) -> None:
        if self._watch is None:
            return
        try:
            self._watch.add(folder)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ENOTDIR):  # e.g. the watches are used up: sweep every poll
                log.warning("%s: %s; every poll lists the directories", self.source, error)
                self._watch = None

    def _read_file(self, key: str, stat: os.stat_result) -> list[Reading]:
        """Parse the complete lines between the saved offset and the size the listing saw (a line appended since
        changes the size: read at the next poll)."""
        state = self._files.get(key)
        if not S_ISREG(stat.st_mode):  # a FIFO or device named *.jsonl: opening one would block the reporter
            if key not in self._seen:
                log.warning("%s: %s is not a regular file; not read", self.source, key)
            self._seen[key] = _signature(stat)
            return []
        if state is not None and state.inode == stat.st_ino and stat.st_size == state.offset:
            self._seen[key] = _signature(stat)
            return []  # nothing new since the saved position
        try:
            # Non-blocking: a FIFO put in the file's place since the listing must not hang the open (or the reads).
            fd = os.open(key, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as error:  # vanished between listing and opening
            log.warning("%s: cannot read %s: %s", self.source, key, error)
            return []
        if os.fstat(fd).st_ino != stat.st_ino:  # replaced since the listing: read at the next poll
            os.close(fd)
            return []
        self._seen[key] = _signature(stat)
        if state is None or state.inode != stat.st_ino or stat.st_size < state.offset:
            if state is not None:
                log.info("%s: %s was replaced; reading it from the start", self.source, key)
            state = self.fresh_state(Path(key), stat.st_ino)
        readings: list[Reading] = []
        offset = state.offset
        try:
            for line in _complete_lines(fd, offset, stat.st_size):
                offset += len(line)
                result = self.parse_line(state, line, offset)
                state = result.state
                self.observed(result)
                if result.reading is not None:
                    readings.append(result.reading)
                if self.collect_events:
                    self._events.extend(result.events)
                    if result.events and (thread := self.thread_of(state)) is not None:
                        self._unsaved_events[thread] += len(result.events)
                self._track(result)
        finally:
            os.close(fd)
        self._files[key] = replaced(state, {"offset": offset}) if offset != state.offset else state
        self._unsaved = True
        return readings

    def _track(self, result: LineResult[S]) -> None:
        thread, cwd = self.thread_of(result.state), result.state.cwd
        if self.facts is None or thread is None or cwd is None:
            return
        self.facts.observe_cwd(thread, cwd)
        if result.at is not None:
            for call_id, command in result.commands:
                self.facts.observe_command(thread, call_id, command, result.at)
        for call_id, failed in result.outcomes:
            self.facts.observe_result(thread, call_id, failed)
        if result.edits:
            self.facts.observe_edit(thread)
        self.touched.add(thread)

    def take_touched(self) -> set[str]:
        touched, self.touched = self.touched, set()
        return touched

    def take_events(self) -> list[SessionEvent]:
        """The session events of the lines read since the last call (with `collect_events`)."""
        events, self._events = self._events, []
        return events

    def queue_events(self, events: Sequence[SessionEvent]) -> None:
        self._events.extend(events)

    def return_events(self, events: list[SessionEvent]) -> None:
        """Events taken but not delivered: first in line again."""
        self._events[:0] = events

    def commit(self, final: bool = False) -> None:
        """Save the read positions atomically, when lines were read since the last save and a save is due (or
        `final`: the reporter stops). Call it only once what the lines derived was delivered."""
        if not self._unsaved:
            return
        now = self._clock()
        recent = self._saved_at is not None and now - self._saved_at < SAVE_SECONDS
        if recent and not final and max(self._unsaved_events.values(), default=0) < SAVE_EVENTS:
            return
        self.save()
        self._unsaved, self._saved_at = False, now
        self._unsaved_events.clear()

    def save(self) -> None:
        raise NotImplementedError


def decode_line(line: bytes) -> Any:
    """`json.loads` of a line, by msgspec's faster decoder where it agrees: what it refuses (NaN, an out-of-range
    float, a lone surrogate, a byte-order mark, text that is no JSON) goes to `json.loads`, which decides. Raises
    ValueError on a line that is no JSON, nested too deeply included."""
    try:
        try:
            return msgspec.json.decode(line)
        except msgspec.DecodeError:
            return json.loads(line)
    except RecursionError as error:  # nested deeper than either parser goes: a malformed line like any other
        raise ValueError("JSON nested too deeply") from error


def _complete_lines(fd: int, start: int, end: int) -> Iterator[bytes]:
    """The complete lines (newline kept) of the file's bytes [start, end), read a chunk at a time: one `pread` for
    the few lines a poll usually finds, and a bounded buffer for a long file read from its start."""
    pending, position = b"", start
    while position < end:
        chunk = os.pread(fd, min(READ_CHUNK, end - position), position)
        if not chunk:  # truncated since the listing: a later poll sees it replaced
            return
        position += len(chunk)
        data, begin = pending + chunk if pending else chunk, 0
        while (newline := data.find(b"\n", begin)) != -1:
            yield data[begin : newline + 1]
            begin = newline + 1
        pending = data[begin:]


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:  # removed or renamed since it was written
        return None


def _signature(stat: os.stat_result) -> Signature:
    return stat.st_ino, stat.st_size, stat.st_mtime_ns
