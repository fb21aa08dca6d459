"""Session events from one Claude Code transcript record (the seed-003 projection's input for real threads).

- An assistant record: `message_added` (assistant) for its text and tool calls; the first record of a reply also a
  `usage_sample` (later records of the same reply repeat the usage).
- A user record: `message_added` (user) for a prompt, `tool_result_added` per tool result, with the tool's name (from
  the call) and its own `truncated` flag (`toolUseResult.truncated`).
- A compaction: `compaction_started` at the boundary (with `preTokens`), then `compaction_summary` and
  `compaction_completed` at the `isCompactSummary` record. The trigger is manual for /compact; an automatic one is
  `mid_loop` when the thread was inside a tool loop (the last record before it was a tool result), else
  `request_start`.

Surface sizes are estimates (UTF-8 bytes / 4); the usage samples anchor them exactly. Ids come from the record's own
`uuid`, times from its `timestamp`, so a re-read yields the same events.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from reporter.session_events import TOOL_RESULT, compaction_finished, compaction_started, estimate_tokens
from schemas import MessageRole, TriggerMode
from schemas.session_events import (
    CompactionStarted,
    MessageAdded,
    SessionEvent,
    ToolResultAdded,
    UsageSample,
)

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input'), ensure_ascii=False)}"
    if kind == TOOL_RESULT:
        content = block.get("content")
        return content if isinstance(content, str) else "".join(_block_text(b) for b in content or [])
    return ""  # thinking of earlier turns is not carried; images are not counted here


def assistant_events(
    record: dict[str, Any], thread_id: str, at: datetime, sample: UsageSample | None
) -> list[SessionEvent]:
    message = record.get("message") or {}
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    text = "".join(_block_text(b) for b in blocks)
    events: list[SessionEvent] = [sample] if sample is not None else []
    if text:
        uid = record["uuid"]
        events.append(
            MessageAdded(
                thread_id=thread_id,
                event_id=f"cc-{uid}-m",
                occurred_at=at,
                role=MessageRole.ASSISTANT,
                token_count=estimate_tokens(text),
            )
        )
    return events


def shell_commands(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool-use id, command) of the shell calls of an assistant record."""
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [
        (str(b["id"]), b["input"]["command"])
        for b in content
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and b.get("name") == "Bash"
        and isinstance((b.get("input") or {}).get("command"), str)
    ]


def tool_outcomes(record: dict[str, Any]) -> list[tuple[str, bool]]:
    """(tool-use id, failed) of the tool results of a user record."""
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [
        (str(b.get("tool_use_id")), b.get("is_error") is True)
        for b in content
        if isinstance(b, dict) and b.get("type") == TOOL_RESULT
    ]


def tool_calls(record: dict[str, Any]) -> dict[str, str]:
    """Tool-use ids of an assistant record -> tool names."""
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list):
        return {}
    return {
        str(b["id"]): str(b.get("name") or "tool")
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")
    }


def user_events(record: dict[str, Any], thread_id: str, at: datetime, tool_names: dict[str, str]) -> list[SessionEvent]:
    uid = record["uuid"]
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return [
            MessageAdded(
                thread_id=thread_id,
                event_id=f"cc-{uid}-m",
                occurred_at=at,
                role=MessageRole.USER,
                token_count=estimate_tokens(content),
            )
        ]
    result = record.get("toolUseResult")
    truncated = isinstance(result, dict) and result.get("truncated") is True
    events: list[SessionEvent] = []
    for index, block in enumerate(content or []):
        text = _block_text(block)
        if isinstance(block, dict) and block.get("type") == TOOL_RESULT:
            events.append(
                ToolResultAdded(
                    thread_id=thread_id,
                    event_id=f"cc-{uid}-t{index}",
                    occurred_at=at,
                    tool_name=tool_names.get(str(block.get("tool_use_id")), "tool"),
                    token_count=estimate_tokens(text),
                    truncated=truncated,
                )
            )
        elif text:
            events.append(
                MessageAdded(
                    thread_id=thread_id,
                    event_id=f"cc-{uid}-m{index}",
                    occurred_at=at,
                    role=MessageRole.USER,
                    token_count=estimate_tokens(text),
                )
            )
    return events


def boundary_event(record: dict[str, Any], thread_id: str, at: datetime, mode: TriggerMode) -> CompactionStarted:
    pre = (record.get("compactMetadata") or {}).get("preTokens")
    tokens = pre if type(pre) is int and pre >= 0 else None
    return compaction_started(thread_id, f"cc-{record['uuid']}-cs", at, mode, tokens)


def summary_events(
    record: dict[str, Any], thread_id: str, at: datetime, mode: TriggerMode, tokens_before: int | None
) -> list[SessionEvent]:
    content = (record.get("message") or {}).get("content")
    blocks = content if isinstance(content, list) else [content]
    tokens = estimate_tokens("".join(_block_text(b) for b in blocks))
    return compaction_finished(thread_id, f"cc-{record['uuid']}", at, mode, tokens_before, tokens)
