"""Codex rollout files (JSONL session logs) -> readings with source `codex_sdk`, and a tailer that resumes.

A rollout line is `{"timestamp": ..., "type": ..., "payload": ...}`. Used: `session_meta` (the thread id), the window,
the last request's usage (`token_count` or `token_usage_record`; the cumulative total is no measure of occupancy),
the model (`turn_context`), and compaction notices, as the Codex versions in use write them (`reporter.codex_formats`).
A heartbeat (`info: null`) or an exact repeat of the last usage changes nothing; a usage above the window (the
compaction request's own, written around a compaction) is no occupancy. Unknown types are counted, quietly.

The tailer keeps, per file, its read offset and the thread's facts so far, and saves them in one JSON state file
(written to a temporary file and renamed, so a crash leaves the old or the new state, never half of one). It consumes
only complete lines: a line still being written is read once its newline arrives.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from reporter.atomic_file import write_atomically
from reporter.budget import TokenUsage
from reporter.codex_formats import (
    ECHO_OF,
    TOKEN_USAGE_RECORD,
    compaction_announcement,
    last_usage_of,
    model_of,
    window_of,
)
from reporter.readings import Reading, SkipLog
from schemas import SourceKind

log = logging.getLogger(__name__)

STATE_FORMAT = 1
KNOWN_TYPES = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted", TOKEN_USAGE_RECORD})
_FILE_THREAD_ID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$")
"""Codex names a rollout `rollout-<time>-<thread uuid>.jsonl`: the id is known before `session_meta` is read."""


class RolloutFileState(BaseModel):
    """What has been read of one rollout file: the offset after the last complete line, and the thread's facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    offset: int = 0
    inode: int | None = None
    thread_id: str | None = None
    window: int | None = None
    last_usage: TokenUsage | None = None
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    last_position: int | None = None
    last_observed_at: datetime | None = None
    usage_stale: bool = False
    """A compaction came after the last token_count: the usage is from before it."""
    model: str | None = None
    last_usage_digest: str | None = None
    """Of the last usage record read: an exact repeat changes nothing."""
    compaction_echo: str | None = None
    """The kind of notice (`record` or `event`) that would announce the compaction last counted a second time."""

    def reading(self) -> Reading | None:
        """The thread's latest reading (its position is the end offset of the line that made it)."""
        if None in (self.thread_id, self.window, self.last_usage, self.last_position, self.last_observed_at):
            return None
        return Reading(
            thread_id=self.thread_id,  # type: ignore[arg-type]
            source_kind=SourceKind.CODEX_SDK,
            position=self.last_position,  # type: ignore[arg-type]
            observed_at=self.last_observed_at,  # type: ignore[arg-type]
            last_usage=self.last_usage,  # type: ignore[arg-type]
            context_window=self.window,  # type: ignore[arg-type]
            compaction_count=self.compaction_count,
            last_compaction_at=self.last_compaction_at,
            usage_stale=self.usage_stale,
            model=self.model,
        )


def _stated_window(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    window = window_of(kind, payload)
    return {} if window is None else {"window": window}


def parse_rollout_line(
    state: RolloutFileState, line: bytes, end_offset: int, skipped: SkipLog
) -> tuple[RolloutFileState, Reading | None]:
    """The file's state after one complete line, and the thread's new reading if the line made one."""
    state = state.model_copy(update={"offset": end_offset})
    if not line.strip():
        return state, None
    try:
        record = json.loads(line)
        kind = record["type"]
        payload = record.get("payload") or {}
        at = datetime.fromisoformat(record["timestamp"])
        if at.tzinfo is None:
            raise ValueError("timestamp without an offset")
        if kind == "session_meta":
            update: dict[str, Any] = {"thread_id": str(payload["id"])}
            return state.model_copy(update=update | _stated_window(kind, payload)), None
        if (model := model_of(kind, payload)) is not None:
            return state.model_copy(update={"model": model}), None
        if (announced := compaction_announcement(kind, payload)) is not None:
            if state.compaction_echo == announced:
                return state.model_copy(update={"compaction_echo": None}), None  # the same compaction's other notice
            update = {"compaction_count": state.compaction_count + 1, "last_compaction_at": at, "usage_stale": True}
            update["compaction_echo"] = ECHO_OF[announced]
            return _with_reading(state.model_copy(update=update), end_offset, at)
        state = state.model_copy(update=_stated_window(kind, payload))
        if (usage := last_usage_of(kind, payload)) is not None:
            last, digest = usage
            if digest == state.last_usage_digest:
                return state, None  # Codex writes each usage record twice
            if state.window is None:
                skipped.skip("no_context_window", f"offset {end_offset}: no model_context_window yet")
                return state, None
            if last.total_tokens > state.window:
                # Around a compaction Codex reports the compaction request's usage, larger than the window.
                skipped.note("usage_above_window")
                return state.model_copy(update={"last_usage_digest": digest}), None
            update = {"last_usage": last, "last_usage_digest": digest, "usage_stale": False}
            return _with_reading(state.model_copy(update=update), end_offset, at)
        if kind not in KNOWN_TYPES:
            skipped.note("unknown_type")
        return state, None
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        skipped.skip("malformed_line", f"offset {end_offset}: {error!r}")
        return state, None


def _with_reading(state: RolloutFileState, end_offset: int, at: datetime) -> tuple[RolloutFileState, Reading | None]:
    state = state.model_copy(update={"last_position": end_offset, "last_observed_at": at})
    return state, state.reading()


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = STATE_FORMAT
    files: dict[str, RolloutFileState] = {}


class RolloutTailer:
    """Reads new complete lines from every `*.jsonl` under a directory (recursively), resuming from a state file.

    `poll()` returns the readings of the lines read since the last poll; `commit()` saves the read positions reached,
    so the caller commits once it has handed those readings on. A file whose inode changed or that shrank below its
    offset was replaced, and is read from its start.
    """

    def __init__(self, directory: Path, state_path: Path) -> None:
        self.directory = directory
        self.state_path = state_path
        self.skipped = SkipLog("codex rollouts")
        self._files: dict[str, RolloutFileState] = self._load()

    def _load(self) -> dict[str, RolloutFileState]:
        if not self.state_path.exists():
            return {}
        state = _StateFile.model_validate_json(self.state_path.read_bytes())
        if state.format != STATE_FORMAT:
            raise ValueError(f"{self.state_path}: state format {state.format}, expected {STATE_FORMAT}")
        return dict(state.files)

    def restored(self) -> list[Reading]:
        """Each known thread's latest reading, to resume the cadence after a restart (a re-send of one already
        delivered carries the same id and version, so the engine drops it)."""
        return [r for r in (s.reading() for s in self._files.values()) if r is not None]

    def poll(self) -> list[Reading]:
        readings: list[Reading] = []
        for path in sorted(self.directory.rglob("*.jsonl")):
            readings.extend(self._read_file(path))
        return readings

    def _read_file(self, path: Path) -> list[Reading]:
        key = str(path)
        try:
            stat = path.stat()
            handle = path.open("rb")
        except OSError as error:  # vanished between listing and opening
            log.warning("codex rollouts: cannot read %s: %s", path, error)
            return []
        state = self._files.get(key)
        if state is None or state.inode != stat.st_ino or stat.st_size < state.offset:
            if state is not None:
                log.info("codex rollouts: %s was replaced; reading it from the start", path)
            match = _FILE_THREAD_ID.search(path.name)
            state = RolloutFileState(inode=stat.st_ino, thread_id=match.group(1) if match else None)
        readings: list[Reading] = []
        with handle:
            handle.seek(state.offset)
            while (line := handle.readline()).endswith(b"\n"):
                state, reading = parse_rollout_line(state, line, state.offset + len(line), self.skipped)
                if reading is not None:
                    readings.append(reading)
        self._files[key] = state
        return readings

    def commit(self) -> None:
        """Save the read positions atomically."""
        write_atomically(self.state_path, _StateFile(files=self._files).model_dump_json(indent=1).encode())
