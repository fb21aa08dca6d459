"""Finished-compaction builders for the fleet's compaction points: each test states only the numbers that matter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.profiles import ClaudeCodeProfile
from schemas import CompactionFinished, TriggerMode

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
CLAUDE_DEFAULT = ClaudeCodeProfile().default_point(200_000)


def finished(tokens: int | None, minute: int, *, mode: TriggerMode = TriggerMode.REQUEST_START,
             project: str = "proj-1", version: str | None = "2.1.328", tool: str = "claude-code",
             model: str = "claude-sonnet-4-5", window: int = 200_000) -> CompactionFinished:  # fmt: skip
    return CompactionFinished(
        event_id=f"cc-{minute}",
        thread_id=f"thread-{minute % 3}",
        project_id=project,
        trigger_mode=mode,
        model=model,
        model_profile=tool,
        completed_at=T0 + timedelta(minutes=minute),
        tokens_before=tokens,
        handoff_ready=False,
        context_window_tokens=window,
        tool_version=version,
    )
