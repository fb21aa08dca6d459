"""What the Claude Code transcript tailer and the Codex rollout tailer share: reading new complete lines of every
`*.jsonl` under a directory from saved offsets, and handing on what each line yields.

A line yields a `LineResult`: the file's new state, maybe a reading, the session events it adds (seed 003's input),
and the shell commands it started and the results it carried, which feed the spec 4.2 `WorkFactTracker` of the
thread's working directory. One derivation for both tools: each tool only says how one of its lines reads.

`poll()` returns the readings of the lines read since the last poll; `commit()` saves the positions reached (the
subclass's `save`, skipped when nothing was read). A file whose inode changed or that shrank below its offset was
replaced, and is read from its start. Only complete lines are consumed: a line still being written is read once its
newline arrives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from reporter.git_facts import WorkFactTracker
from reporter.readings import Reading, SkipLog
from schemas.session_events import SessionEvent

log = logging.getLogger(__name__)


class FileState(Protocol):
    @property
    def offset(self) -> int: ...

    @property
    def inode(self) -> int | None: ...

    @property
    def cwd(self) -> str | None: ...


S = TypeVar("S", bound=FileState)


@dataclass(frozen=True)
class LineResult(Generic[S]):
    state: S
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
    ) -> None:
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

    def fresh_state(self, path: Path, inode: int) -> S:
        raise NotImplementedError

    def parse_line(self, state: S, line: bytes, end_offset: int) -> LineResult[S]:
        raise NotImplementedError

    def thread_of(self, state: S) -> str | None:
        raise NotImplementedError

    def reading_of(self, state: S) -> Reading | None:
        raise NotImplementedError

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
        for path in self._paths():
            if self.includes(path):
                readings.extend(self._read_file(path))
        return readings

    def _paths(self) -> list[Path]:
        """Every `*.jsonl` under the directory, in order (`os.walk` lists a tree of hundreds of files far faster
        than `Path.rglob`, and this runs every poll)."""
        found = []
        for folder, _, names in os.walk(self.directory):
            found.extend(os.path.join(folder, name) for name in names if name.endswith(".jsonl"))
        return [Path(name) for name in sorted(found)]

    def _read_file(self, path: Path) -> list[Reading]:
        key = str(path)
        state = self._files.get(key)
        try:
            stat = path.stat()
            if state is not None and state.inode == stat.st_ino and stat.st_size == state.offset:
                return []  # nothing new: most files, most polls
            handle = path.open("rb")
        except OSError as error:  # vanished between listing and opening
            log.warning("%s: cannot read %s: %s", self.source, path, error)
            return []
        if state is None or state.inode != stat.st_ino or stat.st_size < state.offset:
            if state is not None:
                log.info("%s: %s was replaced; reading it from the start", self.source, path)
            state = self.fresh_state(path, stat.st_ino)
        readings: list[Reading] = []
        with handle:
            handle.seek(state.offset)
            while (line := handle.readline()).endswith(b"\n"):
                result = self.parse_line(state, line, state.offset + len(line))
                state = result.state
                self.observed(result)
                if result.reading is not None:
                    readings.append(result.reading)
                if self.collect_events:
                    self._events.extend(result.events)
                self._track(result)
        self._files[key] = state
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

    def commit(self) -> None:
        """Save the read positions atomically, when lines were read since the last save."""
        if self._unsaved:
            self.save()
            self._unsaved = False

    def save(self) -> None:
        raise NotImplementedError
