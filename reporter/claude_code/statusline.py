"""`ctxbudget statusline`: Claude Code's status-line command (settings.json `statusLine`), which also reports.

Claude Code runs the command on every update with JSON on stdin (`session_id`, `transcript_path`, `model`,
`workspace.current_dir`, `context_window {context_window_size, used_percentage, remaining_percentage, current_usage}`)
and shows the first line it prints. `current_usage` is null before the first reply and right after /compact: then
there is no measure to report and the line says so. The budget is computed with the Claude Code profile, so the line
shows both the room before auto-compaction and the percent Claude Code itself shows.

Claude Code runs the command after every message, far more often than spec 5.1 asks for a report: the line is printed
every time, but a thread is reported only when its level changed or its level's interval passed since its last
report (`report_due`, over the times saved in `StatusReports`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.engine_config import REPORT_INTERVAL_SECONDS
from core.profiles import ClaudeCodeProfile, TokenUsage
from reporter.atomic_file import write_atomically
from reporter.claude_code.transcripts import AGENT_TOOL, position_at
from reporter.readings import Reading
from schemas import ContextBudgetLevel, SourceKind

PROMPT_TOKENS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
SESSIONS_KEPT = 256
"""Threads whose last report time is remembered: a forgotten one is reported at its next update."""


@dataclass(frozen=True)
class StatusInput:
    session_id: str
    model: str | None
    cwd: str | None
    window: int | None
    used_percentage: float | None
    used_tokens: int | None
    """Prompt tokens (input + cache creation + cache read) from `current_usage`; None when Claude Code sent none."""
    output_tokens: int = 0
    """The reply's output from `current_usage`: Claude Code compares prompt + output with its compaction point."""
    version: str | None = None
    """Claude Code's own version."""


def _tokens(usage: Any, names: tuple[str, ...]) -> int | None:
    if not isinstance(usage, dict):
        return None
    values = [usage.get(n) or 0 for n in names]
    if any(type(v) is not int or v < 0 for v in values):
        raise ValueError("current_usage counts are not non-negative integers")
    return sum(values)


def parse_status_input(raw: str) -> StatusInput:
    """Raises ValueError on input that is not Claude Code's status-line JSON."""
    try:
        data = json.loads(raw)
    except RecursionError as error:  # nested deeper than the parser goes: unreadable like any other bad input
        raise ValueError("input nested too deeply") from error
    if not isinstance(data, dict) or not isinstance(data.get("session_id"), str) or not data["session_id"]:
        raise ValueError("no session_id")
    model = data.get("model")
    model_id = model.get("id") if isinstance(model, dict) else model if isinstance(model, str) else None
    workspace = data.get("workspace") if isinstance(data.get("workspace"), dict) else {}
    context = data.get("context_window") if isinstance(data.get("context_window"), dict) else {}
    window = context.get("context_window_size")
    used_pct = context.get("used_percentage")
    version = data.get("version")
    return StatusInput(
        session_id=data["session_id"],
        model=model_id if isinstance(model_id, str) and model_id else None,
        cwd=workspace.get("current_dir") or data.get("cwd"),
        window=window if type(window) is int and window > 0 else None,
        used_percentage=float(used_pct) if isinstance(used_pct, int | float) else None,
        used_tokens=_tokens(usage := context.get("current_usage"), PROMPT_TOKENS),
        output_tokens=_tokens(usage, ("output_tokens",)) or 0,
        version=version if isinstance(version, str) and version else None,
    )


def status_reading(status: StatusInput, profile: ClaudeCodeProfile, now: datetime) -> Reading | None:
    """A reading of the thread, when the input measures it. Its position is the arrival in epoch milliseconds: the
    scale of the same thread's transcript readings (`position_at`), so whichever observed later is the newer."""
    if status.used_tokens is None:
        return None
    window = status.window or profile.window(status.model)
    used = status.used_tokens
    occupancy = used + status.output_tokens
    return Reading(
        thread_id=status.session_id,
        source_kind=SourceKind.WORKER_ESTIMATOR,
        position=position_at(now, None),
        observed_at=now,
        last_usage=TokenUsage(total_tokens=occupancy, input_tokens=used, output_tokens=status.output_tokens),
        context_window=window,
        agent_tool=AGENT_TOOL,
        model=status.model,
        budget_pct=profile.remaining_pct(occupancy, window, status.model),
        shown_pct=profile.shown_pct(used, window) if status.used_percentage is None else 100 - status.used_percentage,
        context_tokens=occupancy,
        tool_version=status.version,
    )


def render(status: StatusInput, reading: Reading | None) -> str:
    """The one line Claude Code shows."""
    model = f"{status.model} · " if status.model else ""
    if reading is None or reading.budget_pct is None:
        return f"{model}ctx: no usage yet"
    left = f"{reading.shown_pct:.0f}% left" if reading.shown_pct is not None else ""
    return (
        f"{model}ctx {reading.last_usage.total_tokens // 1000}k · {left} · {reading.budget_pct:.0f}% before compaction"
    )


class LastReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    at: datetime
    level: ContextBudgetLevel


def report_due(last: LastReport | None, level: ContextBudgetLevel, now: datetime) -> bool:
    """Spec 5.1: at once when the level changed (or never reported), else once the level's interval passed."""
    if last is None or last.level is not level:
        return True
    return now - last.at >= timedelta(seconds=REPORT_INTERVAL_SECONDS[level])


class StatusReports(BaseModel):
    """When each thread was last reported, saved beside the status line's spool (read and written under its lock)."""

    model_config = ConfigDict(extra="forbid")

    sessions: dict[str, LastReport] = {}

    @classmethod
    def load(cls, path: Path) -> StatusReports:
        try:
            return cls.model_validate_json(path.read_bytes()) if path.exists() else cls()
        except ValueError:
            return cls()  # a damaged file only costs one early report

    def reported(self, path: Path, session_id: str, report: LastReport) -> None:
        sessions = {k: v for k, v in self.sessions.items() if k != session_id}
        kept = sorted(sessions.items(), key=lambda item: item[1].at)[-(SESSIONS_KEPT - 1) :]
        self.sessions = dict(kept) | {session_id: report}
        write_atomically(path, self.model_dump_json().encode())
