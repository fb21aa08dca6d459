"""Session events both agent tools' readers make alike: the compaction's start and end, and surface sizes.

A tool's reader says how its records read (reporter/claude_code/events.py, reporter/codex/rollouts.py); what a
compaction becomes, and how a text's tokens are estimated, is one rule for every tool.
"""

from __future__ import annotations

from datetime import datetime

from schemas import TriggerMode
from schemas.session_events import CompactionCompleted, CompactionStarted, CompactionSummary, SessionEvent

TOOL_RESULT = "tool_result"
"""The surface a tool loop ends on: a compaction right after one is `mid_loop`."""


def estimate_tokens(text: str) -> int:
    return max(1, len(text.encode()) // 4) if text else 0


def trigger_of(trigger: str | None, last_surface: str | None) -> TriggerMode:
    if trigger == "manual":
        return TriggerMode.MANUAL
    return TriggerMode.MID_LOOP if last_surface == TOOL_RESULT else TriggerMode.REQUEST_START


def compaction_started(
    thread_id: str, event_id: str, at: datetime, mode: TriggerMode, tokens_before: int | None
) -> CompactionStarted:
    return CompactionStarted(
        thread_id=thread_id, event_id=event_id, occurred_at=at, trigger_mode=mode, tokens_before=tokens_before
    )


def compaction_finished(
    thread_id: str, id_prefix: str, at: datetime, mode: TriggerMode, tokens_before: int | None, summary: int | None
) -> list[SessionEvent]:
    """The summary that replaced the compacted span (the surface drops to it; absent when its size is unknown) and
    the compaction's end."""
    completed = CompactionCompleted(
        thread_id=thread_id,
        event_id=f"{id_prefix}-end",
        occurred_at=at,
        trigger_mode=mode,
        tokens_before=tokens_before,
        tokens_after=summary,
    )
    if summary is None:
        return [completed]
    replaced = CompactionSummary(
        thread_id=thread_id, event_id=f"{id_prefix}-sum", occurred_at=at, trigger_mode=mode, summary_token_count=summary
    )
    return [replaced, completed]
