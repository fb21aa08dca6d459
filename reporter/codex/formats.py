"""How the Codex versions in use write the facts the rollout reader needs (REFERENCES.md, tests/data/codex).

Pure helpers over one record's `type` and `payload`:
- the window: `token_count.info.model_context_window`, `task_started.model_context_window`, or
  `session_meta.context_window`, an int in some versions and an object in others;
- usage: `token_count.info.last_token_usage`, or the newer top-level `token_usage_record`'s `usage` (whose total may
  be absent: input + output then, as ccusage-style readers do); Codex 0.169.0 writes the usage as a
  `token_usage_record`, then again as a `token_count` whose `info.last_usage_includes_reasoning` says whether its own
  percent counts the reasoning tokens;
- compaction, announced as a top-level `compacted`, an `event_msg` `context_compacted`, or a `response_item` of type
  `compaction` / `compaction_summary` / `context_compaction`; versions write one or several of them per compaction.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.profiles import TokenUsage


def codex_home() -> Path:
    """Where Codex keeps its config, hooks and rollouts: `$CODEX_HOME`, else `~/.codex`."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


COMPACTION_ITEM_TYPES = frozenset({"compaction", "compaction_summary", "context_compaction"})
TOKEN_USAGE_RECORD = "token_usage_record"
_USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "cache_write_input_tokens",
)


def _positive_int(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def window_of(kind: str, payload: dict[str, Any]) -> int | None:
    """The context window a record states, if it states one."""
    if kind == "session_meta":
        window = payload.get("context_window")
        if isinstance(window, dict):
            return _positive_int(window.get("model_context_window")) or _positive_int(window.get("context_window"))
        return _positive_int(window)
    if kind == "event_msg" and payload.get("type") in {"task_started", "token_count"}:
        holder = payload.get("info") if payload.get("type") == "token_count" else payload
        return _positive_int((holder or {}).get("model_context_window"))
    return None


def usage_of(raw: Any) -> TokenUsage:
    """A usage breakdown; raises ValueError when a count is not a non-negative integer."""
    if not isinstance(raw, dict):
        raise ValueError("usage is not an object")
    values = {name: raw.get(name, 0) for name in _USAGE_FIELDS}
    if any(type(v) is not int or v < 0 for v in values.values()):
        raise ValueError("token usage needs non-negative integer counts")
    total = raw.get("total_tokens", values["input_tokens"] + values["output_tokens"])
    if type(total) is not int or total < 0:
        raise ValueError("total_tokens is not a non-negative integer")
    return TokenUsage(total_tokens=total, **values)


def last_usage_of(kind: str, payload: dict[str, Any]) -> tuple[TokenUsage, str] | None:
    """The last request's usage a record reports, with a digest that is equal for an exact repeat; None when the
    record reports none (a `token_count` with `info: null` is a rate-limit heartbeat)."""
    if kind == TOKEN_USAGE_RECORD:
        raw = payload.get("usage")
    elif kind == "event_msg" and payload.get("type") == "token_count" and payload.get("info") is not None:
        raw = payload["info"]["last_token_usage"]
    else:
        return None
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()[:16]
    usage = usage_of(raw)
    holder = payload.get("info") if kind == "event_msg" else payload
    flag = holder.get("last_usage_includes_reasoning") if isinstance(holder, dict) else None
    return (replace(usage, includes_reasoning=flag) if isinstance(flag, bool) else usage), digest


ECHO_OF = {"record": "event", "event": "record"}
"""One compaction may be announced by a record (`compacted`, a compaction `response_item`) and by the
`context_compacted` event, in either order: the second notice of the other kind is the same compaction."""


def compaction_announcement(kind: str, payload: dict[str, Any]) -> str | None:
    """`record` or `event` when the line announces a compaction, else None."""
    if kind == "compacted" or (kind == "response_item" and payload.get("type") in COMPACTION_ITEM_TYPES):
        return "record"
    if kind == "event_msg" and payload.get("type") == "context_compacted":
        return "event"
    return None


def model_of(kind: str, payload: dict[str, Any]) -> str | None:
    model = payload.get("model") if kind == "turn_context" else None
    return model if isinstance(model, str) and model else None
