"""Codex app-server notifications (JSON-RPC 2.0, one JSON object per line) -> readings with source `codex_app_server`.

Used: `thread/tokenUsage/updated` (the LAST request's usage and `modelContextWindow`; newer breakdowns add
`cacheWriteInputTokens`, part of the input), a `contextCompaction` item's `item/completed` and the older
`thread/compacted` (one compaction may be announced by both: counted once per turn and usage update). Newer versions
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

import json
import logging
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from reporter.atomic_file import write_atomically
from reporter.budget import TokenUsage
from reporter.readings import Reading, SkipLog
from schemas import SourceKind

log = logging.getLogger(__name__)

TOKEN_USAGE_UPDATED = "thread/tokenUsage/updated"
ITEM_STARTED = "item/started"
ITEM_COMPLETED = "item/completed"
THREAD_COMPACTED = "thread/compacted"
COMPACTION_ITEM = "contextCompaction"
STATE_FORMAT = 1
SAVED_TURNS = 64


@dataclass(frozen=True)
class _Thread:
    reading: Reading | None = None
    window: int | None = None
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    usage_updates: int = 0
    compaction_mark: tuple[str, int] | None = None
    """(turn, usage updates) of the last counted compaction: a second announcement with the same mark is a repeat."""
    usage_updates_at_compaction_start: int | None = None
    """`usage_updates` when a compaction item started: a usage update after it is Codex's recomputed usage of the
    compacted context; without a start seen, or without an update since, the usage is from before the compaction."""


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
        # Without a total, input + output, as ccusage-style readers and the rollout reader (`codex_formats`) count.
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
                    return self._compacting(params)
                return self._compacted(params, now, item.get("windowNumber"))
            if method == THREAD_COMPACTED:
                return self._compacted(params, now)
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
        return self._store(thread_id, thread, last, window, now)

    def _compacting(self, params: dict[str, Any]) -> None:
        thread_id = _thread_id(params)
        thread = self._threads.get(thread_id, _Thread())
        self._threads[thread_id] = replace(thread, usage_updates_at_compaction_start=thread.usage_updates)

    def _compacted(self, params: dict[str, Any], now: datetime, window_number: Any = None) -> Reading | None:
        thread_id = _thread_id(params)
        thread = self._threads.get(thread_id, _Thread())
        turn = params["turnId"]
        mark = (turn, thread.usage_updates)
        numbered = type(window_number) is int and window_number > 0
        if numbered and window_number <= thread.compaction_count:
            return None  # a window already counted
        if not numbered and (mark == thread.compaction_mark or turn in self._earlier_turns.get(thread_id, ())):
            return None
        started = thread.usage_updates_at_compaction_start
        stale = started is None or started == thread.usage_updates
        thread = replace(
            thread,
            compaction_count=window_number if numbered else thread.compaction_count + 1,
            last_compaction_at=now,
            compaction_mark=mark,
            usage_updates_at_compaction_start=None,
        )
        self._save(thread_id, thread, turn)
        if thread.reading is None or thread.window is None:
            self._threads[thread_id] = thread  # counted; reported with the first usage
            return None
        return self._store(thread_id, thread, thread.reading.last_usage, thread.window, now, usage_stale=stale)

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
