"""Codex app-server notifications (JSON-RPC 2.0, one JSON object per line) -> readings with source `codex_app_server`.

Used: `thread/tokenUsage/updated` (the LAST request's usage and `modelContextWindow`; newer breakdowns add
`cacheWriteInputTokens`, part of the input), a `contextCompaction` item's `item/started` / `item/completed` and the
older `thread/compacted` (one compaction may be announced by both: counted once per turn and usage update).

Compactions. The app-server sends no session events, so the parser derives them (`take_events`): `compaction_started`
at the item's start, `compaction_completed` at its end (both, at the end, for a compaction whose start was not seen);
stamped with the item's own `startedAtMs` / `completedAtMs` when given; `manual` when the reporter asked for it
(`expect_manual`, before `thread/compact/start`), else automatic (`request_start`, as the hooks map `auto`). While the
item is open the usage Codex reports is not the thread's occupancy (the compaction request's own, then the compacted
context's estimate, which Codex 0.169.0 sends BEFORE the item completes): the last of them is held and becomes, at
the item's end, the first reading after the compaction; a compaction whose turn ends without it is dropped, and so
is what it held. Newer versions
number a thread's context windows (`windowNumber` on the compaction item, as the rollout's `compacted.window_number`):
when given, it is the compaction count (a reporter attached mid-thread counts the earlier ones too), and a notice of a
window already counted is a repeat. Every other method (`thread/started`, `turn/started`, `item/agentMessage/delta`,
...) and every other item type is counted in `ignored` and otherwise passed over quietly: a real stream is mostly such
notifications, and new ones appear with new Codex versions. Responses are not notifications and are passed over too.
Notifications carry no time, so a reading's time and position are its arrival (see `reporter.readings`).

Given a state file, each thread's compaction count and time are saved there whenever a compaction is counted, and a
restarted reporter continues from them (a new app-server stream does not announce earlier compactions again). The
turns of the counted compactions are saved too: a stream read again (a file given twice) announces them in the same
turns, and they are not counted again (the cost: a second compaction in one turn right across a restart is missed).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.profiles import TokenUsage
from reporter.atomic_file import write_atomically
from reporter.readings import CODEX_COMPACTION_TRIGGER, Reading, SkipLog
from reporter.session_events import compaction_started
from schemas import CompactionCompleted, SessionEvent, SourceKind, TriggerMode

log = logging.getLogger(__name__)

TOKEN_USAGE_UPDATED = "thread/tokenUsage/updated"
ITEM_STARTED = "item/started"
ITEM_COMPLETED = "item/completed"
THREAD_COMPACTED = "thread/compacted"
TURN_COMPLETED = "turn/completed"
COMPACTION_ITEM = "contextCompaction"
STATE_FORMAT = 1
SAVED_TURNS = 64


@dataclass(frozen=True)
class _Compacting:
    """A compaction item that started and has not completed."""

    turn: str
    event_prefix: str
    trigger: TriggerMode
    tokens_before: int | None
    held: TokenUsage | None = None
    """The last usage reported since the start: at the end, the compacted context's."""


@dataclass(frozen=True)
class _Thread:
    reading: Reading | None = None
    window: int | None = None
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    usage_updates: int = 0
    compaction_mark: tuple[str, int] | None = None
    """(turn, usage updates) of the last counted compaction: a second announcement with the same mark is a repeat."""
    compacting: _Compacting | None = None


def _thread_id(params: dict[str, Any]) -> str:
    thread_id = params["threadId"]
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError("threadId is not a non-empty string")
    return thread_id


def _usage(breakdown: Any) -> TokenUsage:
    def count(name: str) -> int:
        value = breakdown.get(name, 0)
        if type(value) is not int or value < 0:
            raise ValueError(f"{name} is not a non-negative integer")
        return value

    if not isinstance(breakdown, dict):
        raise ValueError("a usage breakdown is not an object")
    input_tokens, output_tokens = count("inputTokens"), count("outputTokens")
    return TokenUsage(
        # Without a total, input + output, as ccusage-style readers and the rollout reader (`codex.formats`) count.
        total_tokens=count("totalTokens") if "totalTokens" in breakdown else input_tokens + output_tokens,
        input_tokens=input_tokens,
        cached_input_tokens=count("cachedInputTokens"),
        output_tokens=output_tokens,
        reasoning_output_tokens=count("reasoningOutputTokens"),
        cache_write_input_tokens=count("cacheWriteInputTokens"),  # newer versions; absent is 0
    )


class _SavedThread(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    compacted_turns: list[str] = []
    """Turns of the latest counted compactions, at most `SAVED_TURNS`."""


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = STATE_FORMAT
    threads: dict[str, _SavedThread] = {}


class CodexAppServerParser:
    """Folds notification lines into per-thread readings; a line yields the thread's new reading, or None."""

    def __init__(self, state_path: Path | None = None) -> None:
        self.state_path = state_path
        self._saved = self._load()
        self._earlier_turns = {thread_id: set(saved.compacted_turns) for thread_id, saved in self._saved.items()}
        """Turns whose compactions a previous run counted: announced again only by a replayed stream."""
        self._threads: dict[str, _Thread] = {
            thread_id: _Thread(compaction_count=saved.compaction_count, last_compaction_at=saved.last_compaction_at)
            for thread_id, saved in self._saved.items()
        }
        self.skipped = SkipLog("codex app-server")
        self.ignored: Counter[str] = Counter()
        """Notifications of methods (or items) the reporter does not need, by method."""
        self._events: list[SessionEvent] = []
        self._manual: set[str] = set()
        """Threads whose next compaction the reporter asked for."""

    def expect_manual(self, thread_id: str) -> None:
        """The reporter asks the thread to compact (`thread/compact/start`): its next compaction is manual."""
        self._manual.add(thread_id)

    def take_events(self) -> list[SessionEvent]:
        """The compaction events derived since the last call, in order."""
        events, self._events = self._events, []
        return events

    def feed(self, line: str, now: datetime) -> Reading | None:
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError as error:
            self.skipped.skip("malformed_json", str(error))
            return None
        if not isinstance(message, dict):
            self.skipped.skip("not_an_object", line)
            return None
        method = message.get("method")
        if method is None and "id" in message:
            return None  # a response to a request; carries no notification
        params = message.get("params")
        try:
            if method == TOKEN_USAGE_UPDATED:
                return self._token_usage(params, now)
            item = params.get("item") if method in (ITEM_STARTED, ITEM_COMPLETED) else None
            if isinstance(item, dict) and item.get("type") == COMPACTION_ITEM:
                if method == ITEM_STARTED:
                    return self._compacting(params, item, _stamp(params, "startedAtMs", now))
                return self._compacted(params, _stamp(params, "completedAtMs", now), now, item)
            if method == THREAD_COMPACTED:
                return self._compacted(params, now, now, {})
            if method == TURN_COMPLETED:
                self._turn_completed(params)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            self.skipped.skip("malformed_params", f"{method}: {error!r}")
            return None
        self.ignored[str(method)] += 1
        log.debug("codex app-server: ignored a %s notification", method)
        return None

    def _token_usage(self, params: dict[str, Any], now: datetime) -> Reading | None:
        thread_id = _thread_id(params)
        usage = params["tokenUsage"]
        last = _usage(usage["last"])
        _usage(usage["total"])  # validated only: the cumulative total is no measure of occupancy
        thread = self._threads.get(thread_id, _Thread())
        window = usage.get("modelContextWindow") or thread.window
        if type(window) is not int or window <= 0:
            self.skipped.skip("no_context_window", f"thread {thread_id}: no modelContextWindow yet")
            return None
        thread = replace(thread, window=window, usage_updates=thread.usage_updates + 1)
        if thread.compacting is not None:  # not the occupancy yet: held until the compaction ends
            self._threads[thread_id] = replace(thread, compacting=replace(thread.compacting, held=last))
            return None
        return self._store(thread_id, thread, last, window, now)

    def _compacting(self, params: dict[str, Any], item: dict[str, Any], at: datetime) -> None:
        thread_id = _thread_id(params)
        thread = self._threads.get(thread_id, _Thread())
        turn = params["turnId"]
        if not isinstance(turn, str):
            raise ValueError("turnId is not a string")
        compacting = self._start(thread_id, thread, turn, item.get("id"), turn, at)
        self._threads[thread_id] = replace(thread, compacting=compacting)

    def _start(
        self, thread_id: str, thread: _Thread, turn: str, item_id: Any, fallback: str, at: datetime
    ) -> _Compacting:
        """A compaction begins: said as `compaction_started`, manual when the reporter asked for it."""
        trigger = TriggerMode.MANUAL if thread_id in self._manual else CODEX_COMPACTION_TRIGGER
        self._manual.discard(thread_id)
        compacting = _Compacting(turn, _event_prefix(thread_id, item_id, fallback), trigger, _tokens(thread))
        self._events.append(
            compaction_started(thread_id, f"{compacting.event_prefix}-s", at, trigger, compacting.tokens_before)
        )
        return compacting

    def _turn_completed(self, params: dict[str, Any]) -> None:
        """A compaction still open when its turn ends failed (Codex emits no completion then): nothing is counted, and
        the usage it held was the compaction request's, not the thread's."""
        thread_id = _thread_id(params)
        thread = self._threads.get(thread_id)
        if thread is not None and thread.compacting is not None and thread.compacting.turn == params["turn"]["id"]:
            log.info("codex app-server: thread %r: a compaction ended with its turn, not completed", thread_id)
            self._threads[thread_id] = replace(thread, compacting=None)

    def _compacted(self, params: dict[str, Any], at: datetime, now: datetime, item: dict[str, Any]) -> Reading | None:
        thread_id = _thread_id(params)
        thread = self._threads.get(thread_id, _Thread())
        turn = params["turnId"]
        mark = (turn, thread.usage_updates)
        window_number = item.get("windowNumber")
        numbered = type(window_number) is int and window_number > 0
        if numbered and window_number <= thread.compaction_count:
            return None  # a window already counted
        if not numbered and (mark == thread.compaction_mark or turn in self._earlier_turns.get(thread_id, ())):
            return None
        compacting = thread.compacting
        if compacting is None:  # its start was not seen: said now, whole
            compacting = self._start(thread_id, thread, turn, item.get("id"), f"{turn}|{thread.compaction_count}", at)
        after = compacting.held
        self._events.append(
            CompactionCompleted(
                thread_id=thread_id,
                event_id=f"{compacting.event_prefix}-end",
                occurred_at=at,
                trigger_mode=compacting.trigger,
                tokens_before=compacting.tokens_before,
                tokens_after=after.total_tokens if after is not None else None,
            )
        )
        thread = replace(
            thread,
            compaction_count=window_number if numbered else thread.compaction_count + 1,
            last_compaction_at=at,
            compaction_mark=mark,
            compacting=None,
        )
        self._save(thread_id, thread, turn)
        if after is not None and thread.window is not None:
            return self._store(thread_id, thread, after, thread.window, now)
        if thread.reading is None or thread.window is None:
            self._threads[thread_id] = thread  # counted; reported with the first usage
            return None
        return self._store(thread_id, thread, thread.reading.last_usage, thread.window, now, usage_stale=True)

    def _load(self) -> dict[str, _SavedThread]:
        if self.state_path is None or not self.state_path.exists():
            return {}
        state = _StateFile.model_validate_json(self.state_path.read_bytes())
        if state.format != STATE_FORMAT:
            raise ValueError(f"{self.state_path}: state format {state.format}, expected {STATE_FORMAT}")
        return dict(state.threads)

    def _save(self, thread_id: str, thread: _Thread, turn: str) -> None:
        if self.state_path is None:
            return
        turns = self._saved.get(thread_id, _SavedThread()).compacted_turns
        self._saved[thread_id] = _SavedThread(
            compaction_count=thread.compaction_count,
            last_compaction_at=thread.last_compaction_at,
            compacted_turns=[*(t for t in turns if t != turn), turn][-SAVED_TURNS:],
        )
        write_atomically(self.state_path, _StateFile(threads=self._saved).model_dump_json(indent=1).encode())

    def _store(
        self, thread_id: str, thread: _Thread, last: TokenUsage, window: int, now: datetime, usage_stale: bool = False
    ) -> Reading:
        arrival_ms = int(now.timestamp() * 1000)
        previous = thread.reading.position if thread.reading else -1
        reading = Reading(
            events_derived=True,  # the parser says its compactions itself (`take_events`)
            thread_id=thread_id,
            source_kind=SourceKind.CODEX_APP_SERVER,
            position=max(arrival_ms, previous + 1),
            observed_at=now,
            last_usage=last,
            context_window=window,
            compaction_count=thread.compaction_count,
            last_compaction_at=thread.last_compaction_at,
            usage_stale=usage_stale,
        )
        self._threads[thread_id] = replace(thread, reading=reading)
        return reading


def _stamp(params: dict[str, Any], name: str, now: datetime) -> datetime:
    """The item's own time (Codex 0.169.0 stamps item notifications in epoch milliseconds), else the arrival."""
    stamp = params.get(name)
    return datetime.fromtimestamp(stamp / 1000, UTC) if type(stamp) is int and stamp > 0 else now


def _tokens(thread: _Thread) -> int | None:
    """The occupancy before a compaction: the last reading's, unless it was already from before an earlier one."""
    reading = thread.reading
    return reading.last_usage.total_tokens if reading is not None and not reading.usage_stale else None


def _event_prefix(thread_id: str, item_id: Any, fallback: str) -> str:
    """Event ids from the item's id (the same stream read again gives the same events; consumers drop repeats)."""
    cause = f"{thread_id}|{item_id}" if isinstance(item_id, str) and item_id else f"{thread_id}|turn|{fallback}"
    return "cas-" + hashlib.sha256(cause.encode()).hexdigest()[:24]
