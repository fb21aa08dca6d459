"""Finished-compaction builders for the fleet's compaction points: each test states only the numbers that matter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.profiles import ClaudeCodeProfile
from schemas import CompactionFinished, Record, TriggerMode
from schemas.session_events import CompactionCompleted, CompactionStarted, UsageSample

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
MODEL = "claude-sonnet-4-5"
WINDOW = 200_000
CLAUDE_DEFAULT = ClaudeCodeProfile().default_point(WINDOW)
MOVED_TO = 150_000


def finished(tokens: int | None, minute: int, *, mode: TriggerMode = TriggerMode.REQUEST_START,
             project: str = "proj-1", version: str | None = "2.1.328", tool: str = "claude-code",
             model: str = MODEL, window: int = WINDOW) -> CompactionFinished:  # fmt: skip
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


class Thread:
    """A thread's session events as a worker names them, each with the next id."""

    def __init__(self, thread: str, project: str, worker: str, model: str = MODEL, window: int = WINDOW) -> None:
        self.ids = {"thread_id": thread, "project_id": project, "node_id": f"node-{worker}", "worker_id": worker}
        self.model, self.window = model, window
        self.events = 0

    def _next(self, minute: float) -> dict:
        self.events += 1
        return {**self.ids, "event_id": f"{self.ids['thread_id']}-{self.events}", "occurred_at": at(minute)}

    def usage(self, tokens: int, minute: float, version: str = "2.1.328") -> UsageSample:
        return UsageSample(**self._next(minute), input_tokens=tokens, model=self.model,
                           context_window_tokens=self.window, tool_version=version)  # fmt: skip

    def compaction(self, tokens: int, minute: float, version: str = "2.1.328") -> list[Record]:
        mode = TriggerMode.REQUEST_START
        return [
            self.usage(tokens, minute, version),
            CompactionStarted(**self._next(minute), trigger_mode=mode, tokens_before=tokens),
            CompactionCompleted(
                **self._next(minute + 0.5), trigger_mode=mode, tokens_before=tokens, tokens_after=9_000
            ),
        ]


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)
