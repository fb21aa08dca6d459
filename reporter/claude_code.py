"""Claude Code session transcripts (`~/.claude/projects/<escaped cwd>/<session>.jsonl`) -> readings, and a tailer.

Facts used (REFERENCES.md, and the real transcripts under tests/data/claude_code):
- Context used = `input_tokens + cache_creation_input_tokens + cache_read_input_tokens` of the latest assistant record
  that is not `isSidechain` (a subagent's records replay into its own context, not the thread's).
- One API reply is written as several assistant records sharing `message.id` + `requestId`, each repeating the usage:
  the first makes the reading, the repeats change nothing.
- A compaction is a `system` record with subtype `compact_boundary` and `compactMetadata {trigger, preTokens}`; usage
  written before it is stale, so the compaction is counted at once but reported with the next reply's usage.
- Every other record type (`progress`, `summary`, `file-history-snapshot`, `queue-operation`, other system subtypes,
  API errors, future ones) is skipped quietly.

Threads report as `worker_estimator` (the spec's three source kinds name Codex's two; any other tool is the worker's
own estimate), with `agent_tool` "claude-code" and the model beside it.

The compaction point is not a fixed percent: about window - min(max output, 20k) - 13k, moved server-side without a
release. The profile is configurable, and the point of the latest automatic compaction seen (its `preTokens`) replaces
the formula from then on (`ClaudeCodeProfile.learned`, saved with the read positions).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reporter.atomic_file import write_atomically
from reporter.budget import TokenUsage
from reporter.claude_events import (
    EDIT_TOOLS,
    TOOL_RESULT,
    assistant_events,
    boundary_event,
    shell_commands,
    summary_events,
    tool_calls,
    tool_outcomes,
    trigger_of,
    user_events,
)
from reporter.git_facts import WorkFactTracker
from reporter.jsonl_tailer import FileState, JsonlTailer, decode_line
from reporter.jsonl_tailer import LineResult as JsonlLineResult
from reporter.readings import Reading, SkipLog
from schemas import SourceKind, TriggerMode
from schemas.copies import replaced
from schemas.session_events import ToolResultAdded, UsageSample

log = logging.getLogger(__name__)

AGENT_TOOL = "claude-code"
STATE_FORMAT = 1
DEFAULT_WINDOW_TOKENS = 200_000
LONG_WINDOW_TOKENS = 1_000_000
"""Models run with the 1M-token context (`[1m]` in the model name)."""
DEFAULT_MAX_OUTPUT_TOKENS = 32_000
OUTPUT_RESERVE_CAP = 20_000
AUTO_COMPACT_BUFFER = 13_000
SUBAGENT_DIR = "subagents"
TOOL_NAMES_KEPT = 64
"""Tool calls remembered to name their results: results follow their calls closely."""


@dataclass(frozen=True)
class ClaudeCodeProfile:
    """Where Claude Code compacts, configurable, corrected by what was observed."""

    window_tokens: int = DEFAULT_WINDOW_TOKENS
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    buffer_tokens: int = AUTO_COMPACT_BUFFER
    learned: int | None = None
    """`preTokens` of the latest automatic compaction seen at this window: where it really fired."""

    def window(self, model: str | None) -> int:
        return LONG_WINDOW_TOKENS if model and "[1m]" in model else self.window_tokens

    def compaction_point(self, window: int) -> int:
        if self.learned is not None and self.learned <= window:
            return self.learned
        return max(0, window - min(self.max_output_tokens, OUTPUT_RESERVE_CAP) - self.buffer_tokens)

    def budget_pct(self, used: int, window: int) -> float:
        """Room left before auto-compaction over the span up to it, 0..100."""
        point = self.compaction_point(window)
        return min(100.0, max(0.0, (point - used) / point * 100)) if point > 0 else 0.0

    def shown_pct(self, used: int, window: int) -> float:
        """What Claude Code's own meter shows: the percent of the window left."""
        return min(100.0, max(0.0, (window - used) / window * 100))

    def observe_automatic_compaction(self, pre_tokens: int) -> ClaudeCodeProfile:
        return replace(self, learned=pre_tokens) if pre_tokens > 0 else self


class TranscriptState(FileState):
    """What has been read of one transcript: the offset after the last complete line, and the thread's facts."""

    session_id: str | None = None
    model: str | None = None
    used_tokens: int | None = None
    """None while nothing was measured, or since a compaction until the next reply."""
    cache_read_tokens: int = 0
    output_tokens: int = 0
    reply_key: str | None = None
    """`message.id|requestId` of the reply last counted: its repeated records change nothing."""
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    last_position: int | None = None
    last_observed_at: datetime | None = None
    tool_names: dict[str, str] = Field(default_factory=dict)
    last_surface: str | None = None
    """What the last record added: `assistant`, `prompt` or `tool_result` (where an automatic compaction fired)."""
    compaction_mode: TriggerMode | None = None
    """The trigger of a compaction whose summary has not been read yet."""
    compaction_pre_tokens: int | None = None

    def reading(self, profile: ClaudeCodeProfile) -> Reading | None:
        if self.session_id is None or self.used_tokens is None or self.last_position is None:
            return None
        if self.last_observed_at is None:
            return None
        window = profile.window(self.model)
        usage = TokenUsage(
            total_tokens=self.used_tokens,
            input_tokens=self.used_tokens,
            cached_input_tokens=self.cache_read_tokens,
            output_tokens=self.output_tokens,
        )
        return Reading(
            thread_id=self.session_id,
            source_kind=SourceKind.WORKER_ESTIMATOR,
            position=self.last_position,
            observed_at=self.last_observed_at,
            last_usage=usage,
            context_window=window,
            compaction_count=self.compaction_count,
            last_compaction_at=self.last_compaction_at,
            agent_tool=AGENT_TOOL,
            model=self.model,
            budget_pct=profile.budget_pct(self.used_tokens, window),
            shown_pct=profile.shown_pct(self.used_tokens, window),
        )


def _count(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name, 0)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} is not a non-negative integer")
    return value


def _timestamp(record: dict[str, Any]) -> datetime:
    at = datetime.fromisoformat(record["timestamp"])
    if at.tzinfo is None:
        raise ValueError("timestamp without an offset")
    return at


LineResult = JsonlLineResult[TranscriptState]
"""For annotations: results are built as plain `JsonlLineResult(...)`, since calling the subscripted alias costs
typing's bookkeeping (a refused attribute on a frozen dataclass) on every line."""


def parse_transcript_line(
    state: TranscriptState, line: bytes, end_offset: int, profile: ClaudeCodeProfile, skipped: SkipLog
) -> LineResult:
    """The file's state after one complete line (its offset aside: the tailer's), and the thread's new reading if the
    line made one."""
    if not line.strip():
        return JsonlLineResult(state)
    try:
        record = decode_line(line)
        if not isinstance(record, dict) or record.get("isSidechain") is True:
            return JsonlLineResult(state)
        kind = record.get("type")
        facts: dict[str, Any] = {}
        session, cwd = record.get("sessionId"), record.get("cwd")
        if isinstance(session, str) and session and session != state.session_id:
            facts["session_id"] = session
        if isinstance(cwd, str) and cwd != state.cwd:
            facts["cwd"] = cwd
        if kind == "system" and record.get("subtype") == "compact_boundary":
            at = _timestamp(record)
            meta = record.get("compactMetadata") or {}
            pre = meta.get("preTokens")
            mode = trigger_of(meta.get("trigger"), state.last_surface)
            facts |= {
                "compaction_count": state.compaction_count + 1,
                "last_compaction_at": at,
                "used_tokens": None,  # stale until the next reply
                "reply_key": None,
                "compaction_mode": mode,
                "compaction_pre_tokens": pre if type(pre) is int else None,
            }
            state = replaced(state, facts)
            learned = pre if meta.get("trigger") == "auto" and type(pre) is int else None
            return JsonlLineResult(state, None, learned, (boundary_event(record, _thread(state), at, mode),))
        if kind == "assistant":
            return _assistant(state, record, facts, end_offset, profile)
        if kind == "user":
            return _user(state, record, facts)
        return JsonlLineResult(replaced(state, facts) if facts else state)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        skipped.skip("malformed_line", f"offset {end_offset}: {error!r}")
        return JsonlLineResult(state)


def _thread(state: TranscriptState) -> str:
    if state.session_id is None:
        raise ValueError("no session id yet")
    return state.session_id


def _assistant(
    state: TranscriptState, record: dict[str, Any], facts: dict[str, Any], end_offset: int, profile: ClaudeCodeProfile
) -> LineResult:
    message = record.get("message") or {}
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return JsonlLineResult(replaced(state, facts) if facts else state)
    at = _timestamp(record)
    calls = tool_calls(record)
    if calls:
        names = {**state.tool_names, **calls}
        facts["tool_names"] = dict(list(names.items())[-TOOL_NAMES_KEPT:])
    if state.last_surface != "assistant":
        facts["last_surface"] = "assistant"
    edits = any(name in EDIT_TOOLS for name in calls.values())
    key = f"{message.get('id')}|{record.get('requestId')}"
    if key == state.reply_key:  # a later record of the same reply: its content is new, its usage is not
        state = replaced(state, facts) if facts else state
        events = tuple(assistant_events(record, _thread(state), at, None))
        return JsonlLineResult(state, None, None, events, tuple(shell_commands(record)), at=at, edits=edits)
    used = sum(_count(usage, n) for n in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    model = message.get("model")
    facts |= {
        "used_tokens": used,
        "cache_read_tokens": _count(usage, "cache_read_input_tokens"),
        "output_tokens": _count(usage, "output_tokens"),
        "reply_key": key,
        "last_position": end_offset,
        "last_observed_at": at,
    }
    if isinstance(model, str) and model and not model.startswith("<"):  # `<synthetic>` replies name no model
        facts["model"] = model
    state = replaced(state, facts)
    sample = UsageSample(
        thread_id=_thread(state),
        event_id=f"cc-{record['uuid']}-u",
        occurred_at=at,
        input_tokens=used,
        cached_input_tokens=state.cache_read_tokens,
        output_tokens=state.output_tokens,
        model=state.model,
        context_window_tokens=profile.window(state.model),
    )
    events = tuple(assistant_events(record, _thread(state), at, sample))
    commands = tuple(shell_commands(record))
    return JsonlLineResult(state, state.reading(profile), None, events, commands, at=at, edits=edits)


def _user(state: TranscriptState, record: dict[str, Any], facts: dict[str, Any]) -> LineResult:
    at = _timestamp(record)
    thread = facts.get("session_id", state.session_id)
    if thread is None:
        raise ValueError("no session id yet")
    if record.get("isCompactSummary") is True:
        mode = state.compaction_mode or TriggerMode.REQUEST_START
        events = summary_events(record, thread, at, mode, state.compaction_pre_tokens)
        facts |= {"compaction_mode": None, "compaction_pre_tokens": None, "last_surface": None}
        return JsonlLineResult(replaced(state, facts), events=tuple(events))
    events = user_events(record, thread, at, state.tool_names)
    surface = TOOL_RESULT if any(isinstance(e, ToolResultAdded) for e in events) else "prompt"
    if surface != state.last_surface:
        facts["last_surface"] = surface
    state = replaced(state, facts) if facts else state
    return JsonlLineResult(state, events=tuple(events), outcomes=tuple(tool_outcomes(record)))


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = STATE_FORMAT
    learned_compaction_point: int | None = None
    files: dict[str, TranscriptState] = {}


class TranscriptTailer(JsonlTailer[TranscriptState]):
    """Reads new complete lines of every session transcript under a projects directory, resuming from a state file.

    Subagent transcripts (`<session>/subagents/*.jsonl`) are not read: every record in them is a sidechain. The
    profile learns the point of every automatic compaction seen, and saves it with the read positions.
    """

    source = "claude code transcripts"

    def __init__(
        self,
        directory: Path,
        state_path: Path,
        profile: ClaudeCodeProfile | None = None,
        collect_events: bool = False,
        facts: WorkFactTracker | None = None,
        clock: Callable[[], float] = time.monotonic,
        watch: bool = True,
    ) -> None:
        self.state_path = state_path
        state = self._load()
        super().__init__(directory, dict(state.files), collect_events, facts, clock, watch)
        self.profile = replace(profile or ClaudeCodeProfile(), learned=state.learned_compaction_point)

    def _load(self) -> _StateFile:
        if not self.state_path.exists():
            return _StateFile()
        state = _StateFile.model_validate_json(self.state_path.read_bytes())
        if state.format != STATE_FORMAT:
            raise ValueError(f"{self.state_path}: state format {state.format}, expected {STATE_FORMAT}")
        return state

    def includes(self, path: Path) -> bool:
        return SUBAGENT_DIR not in path.relative_to(self.directory).parts

    def fresh_state(self, path: Path, inode: int) -> TranscriptState:
        return TranscriptState(inode=inode, session_id=path.stem)

    def parse_line(self, state: TranscriptState, line: bytes, end_offset: int) -> LineResult:
        return parse_transcript_line(state, line, end_offset, self.profile, self.skipped)

    def thread_of(self, state: TranscriptState) -> str | None:
        return state.session_id

    def reading_of(self, state: TranscriptState) -> Reading | None:
        return state.reading(self.profile)

    def observed(self, result: LineResult) -> None:
        if result.automatic_compaction_at is not None:
            self.profile = self.profile.observe_automatic_compaction(result.automatic_compaction_at)

    def save(self) -> None:
        """Save the read positions and the learned compaction point atomically."""
        state = _StateFile(learned_compaction_point=self.profile.learned, files=self._files)
        write_atomically(self.state_path, state.model_dump_json(indent=1).encode())
