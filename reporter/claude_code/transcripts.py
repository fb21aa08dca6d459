"""Claude Code session transcripts (`~/.claude/projects/<escaped cwd>/<session>.jsonl`) -> readings, and a tailer.

Facts used (REFERENCES.md, and the real transcripts under tests/data/claude_code):
- Context used = `input_tokens + cache_creation_input_tokens + cache_read_input_tokens` of the latest assistant record
  that is not `isSidechain` (a subagent's records replay into its own context, not the thread's). Claude Code 2.1.328
  compares that plus the reply's `output_tokens` with its compaction point, so the budget does too.
- One API reply is written as several assistant records sharing `message.id` + `requestId`, each repeating the usage:
  the first makes the reading and the usage sample; a repeat only raises the output count as the reply streams.
- A record Claude Code wrote itself (`model: "<synthetic>"`, `isApiErrorMessage: true`, e.g. "Prompt is too long")
  carries zero usage: it measures nothing and is no usage source; a compaction right after it is reactive.
- A compaction is a `system` record with subtype `compact_boundary` and `compactMetadata {trigger, preTokens}`; usage
  written before it is stale: the compaction is counted at once, and its reading says the usage is stale
  (`Reading.usage_stale`), so the reporter stops re-sending the reading of before (its occupancy is gone) until the
  next reply's usage.
- Every other record type (`progress`, `summary`, `file-history-snapshot`, `queue-operation`, `attachment`,
  `api-request*`, other system subtypes, future ones) is skipped quietly.

Threads report as `worker_estimator` (the spec's three source kinds name Codex's two; any other tool is the worker's
own estimate), with `agent_tool` "claude-code" and the model beside it. The status line reports the same thread under
the same source kind, so both put their readings on one scale: the observed time (`position_at`).

The compaction point is not a fixed percent: the core profile's formula, moved server-side without a release. The
profile is configurable, and the threshold automatic compactions seen (their `preTokens`) teach the point per
(model, window) within a band around the formula (`core.compaction_points`, saved with the read positions).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.compaction_points import LearnedPoints, PointKey
from core.profiles import ClaudeCodeProfile, TokenUsage
from reporter.atomic_file import write_atomically
from reporter.claude_code.events import (
    EDIT_TOOLS,
    assistant_events,
    boundary_event,
    shell_commands,
    summary_events,
    tool_calls,
    tool_outcomes,
    user_events,
)
from reporter.git_facts import WorkFactTracker
from reporter.jsonl_tailer import FileState, JsonlTailer, decode_line
from reporter.jsonl_tailer import LineResult as JsonlLineResult
from reporter.readings import Reading, SkipLog
from reporter.session_events import TOOL_RESULT, trigger_of
from schemas import SourceKind, TriggerMode
from schemas.copies import replaced
from schemas.session_events import ToolResultAdded, UsageSample

log = logging.getLogger(__name__)

AGENT_TOOL = ClaudeCodeProfile.name
STATE_FORMAT = 2
"""2: the learned compaction points per (tool, model, window); format 1's single point is dropped (it may be a
reactive compaction's)."""
SUBAGENT_DIR = "subagents"
TOOL_NAMES_KEPT = 64
"""Tool calls remembered to name their results: results follow their calls closely."""
SYNTHETIC_MODEL = "<synthetic>"
"""The model of a record Claude Code wrote itself (an API error such as "Prompt is too long"), with zero usage."""


def is_synthetic_reply(record: dict[str, Any]) -> bool:
    """An assistant record no model wrote: its usage (all zero) measures nothing."""
    message = record.get("message") or {}
    return record.get("isApiErrorMessage") is True or message.get("model") == SYNTHETIC_MODEL


def position_at(at: datetime, previous: int | None) -> int:
    """A reading's position on the one scale both `worker_estimator` sources of a thread share (the transcript and
    the status line): the observed time in epoch milliseconds, kept growing within the source."""
    return max(int(at.timestamp() * 1000), -1 if previous is None else previous + 1)


class TranscriptState(FileState):
    """What has been read of one transcript: the offset after the last complete line, and the thread's facts."""

    session_id: str | None = None
    model: str | None = None
    tool_version: str | None = None
    """Claude Code's `version`, which every record carries."""
    used_tokens: int | None = None
    """Prompt tokens of the last reply (input + cache creation + cache read): None while nothing was measured."""
    usage_stale: bool = False
    """A compaction came after the last reply: its usage is no longer the context's, until the next reply."""
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
    compaction_started_at: datetime | None = None
    """When that compaction began (its `compaction_started` event's time)."""
    after_api_error: bool = False
    """The last assistant record was Claude Code's own API error (`<synthetic>`): a compaction now is reactive."""

    def reading(self, profile: ClaudeCodeProfile) -> Reading | None:
        if self.session_id is None or self.used_tokens is None or self.last_position is None:
            return None
        if self.last_observed_at is None:
            return None
        window = profile.window(self.model)
        occupancy = self.used_tokens + self.output_tokens  # what Claude Code compares with its point (core.profiles)
        usage = TokenUsage(
            total_tokens=occupancy,
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
            usage_stale=self.usage_stale,
            agent_tool=AGENT_TOOL,
            model=self.model,
            budget_pct=profile.remaining_pct(occupancy, window, self.model),
            shown_pct=profile.shown_pct(self.used_tokens, window),
            context_tokens=occupancy,
            tool_version=self.tool_version,
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
        session, cwd, version = record.get("sessionId"), record.get("cwd"), record.get("version")
        if isinstance(session, str) and session and session != state.session_id:
            facts["session_id"] = session
        if isinstance(cwd, str) and cwd != state.cwd:
            facts["cwd"] = cwd
        if isinstance(version, str) and version and version != state.tool_version:
            facts["tool_version"] = version
        if kind == "system" and record.get("subtype") == "compact_boundary":
            at = _timestamp(record)
            meta = record.get("compactMetadata") or {}
            pre, duration = meta.get("preTokens"), meta.get("durationMs")
            mode = trigger_of(meta.get("trigger"), state.last_surface)
            # 2.1.328 writes the boundary after the summary, stamped later than it: the compaction began `durationMs`
            # before the boundary's time (older versions say no duration and stamp the boundary first).
            started = at - timedelta(milliseconds=duration) if type(duration) is int and duration >= 0 else at
            facts |= {
                "compaction_count": state.compaction_count + 1,
                "last_compaction_at": at,
                "usage_stale": True,  # until the next reply
                "reply_key": None,
                "last_position": position_at(at, state.last_position),
                "last_observed_at": at,
                "compaction_mode": mode,
                "compaction_pre_tokens": pre if type(pre) is int else None,
                "compaction_started_at": started,
            }
            state = replaced(state, facts)
            learned = pre if meta.get("trigger") == "auto" and type(pre) is int else None
            events = (boundary_event(record, _thread(state), started, mode),)
            return JsonlLineResult(state, state.reading(profile), learned, events)
        if kind == "assistant":
            return _assistant(state, record, facts, profile)
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
    state: TranscriptState, record: dict[str, Any], facts: dict[str, Any], profile: ClaudeCodeProfile
) -> LineResult:
    message = record.get("message") or {}
    usage = message.get("usage")
    if is_synthetic_reply(record):  # "Prompt is too long" and kin: no context was measured, and none emptied
        return JsonlLineResult(replaced(state, facts | {"after_api_error": True}))
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
    if key == state.reply_key:
        # A later record of the same reply: its content is new, its prompt is not; its output count may have grown
        # (a reply streamed as several records), and Claude Code compares the output too.
        grew = (output := _count(usage, "output_tokens")) > state.output_tokens
        if grew:
            position = position_at(at, state.last_position)
            facts |= {"output_tokens": output, "last_position": position, "last_observed_at": at}
        state = replaced(state, facts) if facts else state
        reading = state.reading(profile) if grew else None
        events = tuple(assistant_events(record, _thread(state), at, None))
        return JsonlLineResult(state, reading, None, events, tuple(shell_commands(record)), at=at, edits=edits)
    used = sum(_count(usage, n) for n in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    model = message.get("model")
    facts |= {
        "used_tokens": used,
        "cache_read_tokens": _count(usage, "cache_read_input_tokens"),
        "output_tokens": _count(usage, "output_tokens"),
        "reply_key": key,
        "last_position": position_at(at, state.last_position),
        "last_observed_at": at,
        "after_api_error": False,
        "usage_stale": False,
    }
    if isinstance(model, str) and model:
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
        tool_version=state.tool_version,
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
        done = max(at, state.compaction_started_at or at)  # never before its start, whatever the stamps say
        events = summary_events(record, thread, done, mode, state.compaction_pre_tokens)
        facts |= {
            "compaction_mode": None,
            "compaction_pre_tokens": None,
            "compaction_started_at": None,
            "last_surface": None,
        }
        return JsonlLineResult(replaced(state, facts), events=tuple(events))
    events = user_events(record, thread, at, state.tool_names)
    surface = TOOL_RESULT if any(isinstance(e, ToolResultAdded) for e in events) else "prompt"
    if surface != state.last_surface:
        facts["last_surface"] = surface
    state = replaced(state, facts) if facts else state
    return JsonlLineResult(state, events=tuple(events), outcomes=tuple(tool_outcomes(record)))


class _LearnedSamples(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    model: str
    window: int
    tokens_before: list[int]


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = STATE_FORMAT
    learned_points: list[_LearnedSamples] = []
    """Recent threshold compactions per (tool, model, window), in `LearnedPoints` order."""
    learned_compaction_point: int | None = None
    """Format 1's single point: read, never used."""
    files: dict[str, TranscriptState] = {}

    def learned(self) -> LearnedPoints:
        samples = {PointKey(s.tool, s.model, s.window): tuple(s.tokens_before) for s in self.learned_points}
        return LearnedPoints(MappingProxyType(samples))

    @classmethod
    def of(cls, learned: LearnedPoints, files: dict[str, TranscriptState]) -> _StateFile:
        points = [
            _LearnedSamples(tool=k.tool, model=k.model, window=k.window, tokens_before=list(v))
            for k, v in learned.samples.items()
        ]
        return cls(learned_points=points, files=files)


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
        self.profile = replace(profile or ClaudeCodeProfile(), learned=state.learned())

    def _load(self) -> _StateFile:
        if not self.state_path.exists():
            return _StateFile()
        state = _StateFile.model_validate_json(self.state_path.read_bytes())
        if state.format not in (1, STATE_FORMAT):
            raise ValueError(f"{self.state_path}: state format {state.format}, expected {STATE_FORMAT}")
        return state

    def includes(self, path: Path) -> bool:
        return SUBAGENT_DIR not in path.relative_to(self.directory).parts

    def fresh_state(self, path: Path, inode: int) -> TranscriptState:
        return TranscriptState(inode=inode, session_id=path.stem)

    def parse_line(self, state: TranscriptState, line: bytes, end_offset: int) -> LineResult:
        result = parse_transcript_line(state, line, end_offset, self.profile, self.skipped)
        return result if result.reading is None else replace(result, reading=self.derived(result.reading))

    def thread_of(self, state: TranscriptState) -> str | None:
        return state.session_id

    def reading_of(self, state: TranscriptState) -> Reading | None:
        return self.derived(state.reading(self.profile))

    def observed(self, result: LineResult) -> None:
        if result.automatic_compaction_at is not None:
            state = result.state
            self.profile = self.profile.observe_automatic_compaction(
                state.model, result.automatic_compaction_at, state.after_api_error
            )

    def save(self) -> None:
        """Save the read positions and the learned compaction point atomically."""
        state = _StateFile.of(self.profile.learned, self._files)
        write_atomically(self.state_path, state.model_dump_json(indent=1).encode())
