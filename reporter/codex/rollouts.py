"""Codex rollout files (JSONL session logs) -> readings with source `codex_sdk`, and a tailer that resumes.

A rollout line is `{"timestamp": ..., "type": ..., "payload": ...}`. Used: `session_meta` (the thread id), the window,
the last request's usage (`token_count` or `token_usage_record`; the cumulative total is no measure of occupancy),
the model (`turn_context`), and compaction notices, as the Codex versions in use write them (`reporter.codex.formats`).
A heartbeat (`info: null`) or an exact repeat of the last usage changes nothing; a usage above the window (the
compaction request's own, written around a compaction) is no occupancy. Unknown types are counted, quietly.

Like a Claude Code transcript (the same `reporter.jsonl_tailer` loop), a rollout also yields session events: its
messages, tool calls and results (`reporter.codex.events`), a usage sample per usage counted, and at a compaction
`compaction_started`, `compaction_summary` (the replacement history's size) and `compaction_completed`; the trigger
is `mid_loop` when a tool result came last before it, else `request_start` (rollouts do not say). Its working
directory (`session_meta` / `turn_context` `cwd`) and shell commands feed the spec 4.2 work facts.

The tailer keeps, per file, its read offset and the thread's facts so far, and saves them in one JSON state file
(written to a temporary file and renamed, so a crash leaves the old or the new state, never half of one).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.profiles import TokenUsage
from reporter.atomic_file import write_atomically
from reporter.codex.events import (
    call_names,
    command_outcomes,
    edits,
    event_id,
    replacement_tokens,
    shell_commands,
    surface_events,
)
from reporter.codex.formats import (
    ECHO_OF,
    TOKEN_USAGE_RECORD,
    compaction_announcement,
    last_usage_of,
    model_of,
    window_of,
)
from reporter.git_facts import WorkFactTracker
from reporter.jsonl_tailer import FileState, JsonlTailer, decode_line
from reporter.jsonl_tailer import LineResult as JsonlLineResult
from reporter.readings import Reading, SkipLog
from reporter.session_events import TOOL_RESULT, compaction_finished, compaction_started, trigger_of
from schemas import SourceKind
from schemas.copies import replaced
from schemas.session_events import ToolResultAdded, UsageSample

log = logging.getLogger(__name__)

STATE_FORMAT = 1
KNOWN_TYPES = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted", TOKEN_USAGE_RECORD})
_FILE_THREAD_ID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$")
"""Codex names a rollout `rollout-<time>-<thread uuid>.jsonl`: the id is known before `session_meta` is read."""
TOOL_NAMES_KEPT = 64
"""Calls remembered to name their outputs: outputs follow their calls closely."""


class RolloutFileState(FileState):
    """What has been read of one rollout file: the offset after the last complete line, and the thread's facts."""

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
    tool_version: str | None = None
    """Codex's `cli_version` (`session_meta`)."""
    last_usage_digest: str | None = None
    """Of the last usage record read: an exact repeat changes nothing."""
    compaction_echo: str | None = None
    """The kind of notice (`record` or `event`) that would announce the compaction last counted a second time."""
    tool_names: dict[str, str] = Field(default_factory=dict)
    last_surface: str | None = None
    """What the last surface record added: `message` or `tool_result` (where an automatic compaction fired)."""

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
            tool_version=self.tool_version,
        )


LineResult = JsonlLineResult[RolloutFileState]
"""For annotations: results are built as plain `JsonlLineResult(...)`, since calling the subscripted alias costs
typing's bookkeeping (a refused attribute on a frozen dataclass) on every line."""


def _stated_window(state: RolloutFileState, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    window = window_of(kind, payload)
    return {} if window is None or window == state.window else {"window": window}


def _cwd(state: RolloutFileState, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    cwd = payload.get("cwd") if kind in ("session_meta", "turn_context") else None
    return {"cwd": cwd} if isinstance(cwd, str) and cwd and cwd != state.cwd else {}


def _updated(state: RolloutFileState, update: dict[str, Any]) -> RolloutFileState:
    return replaced(state, update) if update else state


def parse_rollout_line(state: RolloutFileState, line: bytes, end_offset: int, skipped: SkipLog) -> LineResult:
    """The file's state after one complete line (its offset aside: the tailer's): the thread's new reading if the
    line made one, the session events it adds, and the shell commands it started or finished."""
    if not line.strip():
        return JsonlLineResult(state)
    try:
        record = decode_line(line)
        kind = record["type"]
        payload = record.get("payload") or {}
        at = datetime.fromisoformat(record["timestamp"])
        if at.tzinfo is None:
            raise ValueError("timestamp without an offset")
        if kind == "session_meta":
            update: dict[str, Any] = {"thread_id": str(payload["id"])}
            if isinstance(version := payload.get("cli_version"), str) and version:
                update["tool_version"] = version
            return JsonlLineResult(
                replaced(state, update | _stated_window(state, kind, payload) | _cwd(state, kind, payload))
            )
        if (model := model_of(kind, payload)) is not None:
            update = ({"model": model} if model != state.model else {}) | _cwd(state, kind, payload)
            return JsonlLineResult(_updated(state, update))
        if (announced := compaction_announcement(kind, payload)) is not None:
            return _compaction(state, announced, payload, end_offset, at)
        window = _stated_window(state, kind, payload)
        if (usage := last_usage_of(kind, payload)) is not None:
            return _usage(state, window, *usage, end_offset, at, skipped)
        state = _updated(state, window)
        if kind not in KNOWN_TYPES:
            skipped.note("unknown_type")
            return JsonlLineResult(state)
        return _surface(state, kind, payload, end_offset, at)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        skipped.skip("malformed_line", f"offset {end_offset}: {error!r}")
        return JsonlLineResult(state)


def _surface(state: RolloutFileState, kind: str, payload: dict[str, Any], end_offset: int, at: datetime) -> LineResult:
    update: dict[str, Any] = {}
    names = state.tool_names
    if calls := call_names(kind, payload):
        names = {**names, **calls}
        update["tool_names"] = dict(list(names.items())[-TOOL_NAMES_KEPT:])
    events = surface_events(kind, payload, state.thread_id, end_offset, at, names) if state.thread_id else []
    if (
        events
        and (surface := TOOL_RESULT if isinstance(events[-1], ToolResultAdded) else "message") != state.last_surface
    ):
        update["last_surface"] = surface
    commands, outcomes = shell_commands(kind, payload), command_outcomes(kind, payload)
    return JsonlLineResult(
        _updated(state, update),
        events=tuple(events),
        commands=tuple(commands),
        outcomes=tuple(outcomes),
        at=at,
        edits=edits(kind, payload),
    )


def _usage(
    state: RolloutFileState,
    window: dict[str, Any],
    last: TokenUsage,
    digest: str,
    end_offset: int,
    at: datetime,
    skipped: SkipLog,
) -> LineResult:
    """`window`: the update of the window the same record states."""
    if digest == state.last_usage_digest:  # Codex writes each usage twice; the second may say how it counts
        kept = state.last_usage
        if kept is None or last.includes_reasoning in (None, kept.includes_reasoning):
            return JsonlLineResult(_updated(state, window))
        state, reading = _with_reading(state, window | {"last_usage": last}, end_offset, at)
        return JsonlLineResult(state, reading)
    limit = window.get("window", state.window)
    if limit is None:
        skipped.skip("no_context_window", f"offset {end_offset}: no model_context_window yet")
        return JsonlLineResult(state)
    if last.total_tokens > limit:
        # Around a compaction Codex reports the compaction request's usage, larger than the window.
        skipped.note("usage_above_window")
        return JsonlLineResult(replaced(state, window | {"last_usage_digest": digest}))
    update = window | {"last_usage": last, "last_usage_digest": digest, "usage_stale": False}
    state, reading = _with_reading(state, update, end_offset, at)
    if state.thread_id is None:
        return JsonlLineResult(state, reading)
    sample = UsageSample(
        thread_id=state.thread_id,
        event_id=event_id(state.thread_id, end_offset, "u"),
        occurred_at=at,
        input_tokens=last.input_tokens,
        cached_input_tokens=last.cached_input_tokens,
        output_tokens=last.output_tokens,
        reasoning_output_tokens=last.reasoning_output_tokens,
        model=state.model,
        context_window_tokens=state.window,
        tool_version=state.tool_version,
    )
    return JsonlLineResult(state, reading, events=(sample,), at=at)


def _compaction(
    state: RolloutFileState, announced: str, payload: dict[str, Any], end_offset: int, at: datetime
) -> LineResult:
    window_number = payload.get("window_number")  # newer versions number the context windows: a repeat says so
    if state.compaction_echo == announced or (type(window_number) is int and window_number <= state.compaction_count):
        return JsonlLineResult(replaced(state, {"compaction_echo": None}))  # the same compaction's other notice
    mode = trigger_of(None, state.last_surface)  # rollouts do not say what started it
    before = state.last_usage.total_tokens if state.last_usage and not state.usage_stale else None
    update = {
        "compaction_count": window_number if type(window_number) is int else state.compaction_count + 1,
        "last_compaction_at": at,
        "usage_stale": True,
        "last_surface": None,
        "compaction_echo": ECHO_OF[announced],
    }
    state, reading = _with_reading(state, update, end_offset, at)
    if state.thread_id is None:
        return JsonlLineResult(state, reading)
    prefix = event_id(state.thread_id, end_offset, "c")
    events = [
        compaction_started(state.thread_id, f"{prefix}s", at, mode, before),
        *compaction_finished(state.thread_id, prefix, at, mode, before, replacement_tokens(payload)),
    ]
    return JsonlLineResult(state, reading, events=tuple(events))


def _with_reading(
    state: RolloutFileState, update: dict[str, Any], end_offset: int, at: datetime
) -> tuple[RolloutFileState, Reading | None]:
    state = replaced(state, update | {"last_position": end_offset, "last_observed_at": at})
    return state, state.reading()


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = STATE_FORMAT
    files: dict[str, RolloutFileState] = {}


class RolloutTailer(JsonlTailer[RolloutFileState]):
    """Reads new complete lines from every `*.jsonl` under a directory (recursively), resuming from a state file.

    With `collect_events` the tailer says the thread's compactions itself (its readings are marked
    `events_derived`, so the reporter does not say them a second time).
    """

    source = "codex rollouts"

    def __init__(
        self,
        directory: Path,
        state_path: Path,
        collect_events: bool = False,
        facts: WorkFactTracker | None = None,
        clock: Callable[[], float] = time.monotonic,
        watch: bool = True,
    ) -> None:
        self.state_path = state_path
        super().__init__(directory, self._load(), collect_events, facts, clock, watch)

    def _load(self) -> dict[str, RolloutFileState]:
        if not self.state_path.exists():
            return {}
        state = _StateFile.model_validate_json(self.state_path.read_bytes())
        if state.format != STATE_FORMAT:
            raise ValueError(f"{self.state_path}: state format {state.format}, expected {STATE_FORMAT}")
        return dict(state.files)

    def fresh_state(self, path: Path, inode: int) -> RolloutFileState:
        match = _FILE_THREAD_ID.search(path.name)
        return RolloutFileState(inode=inode, thread_id=match.group(1) if match else None)

    def parse_line(self, state: RolloutFileState, line: bytes, end_offset: int) -> LineResult:
        result = parse_rollout_line(state, line, end_offset, self.skipped)
        return result if result.reading is None else replace(result, reading=self.derived(result.reading))

    def thread_of(self, state: RolloutFileState) -> str | None:
        return state.thread_id

    def reading_of(self, state: RolloutFileState) -> Reading | None:
        return self.derived(state.reading())

    def save(self) -> None:
        """Save the read positions atomically."""
        write_atomically(self.state_path, _StateFile(files=self._files).model_dump_json(indent=1).encode())
