"""`ctxbudget hook`: Claude Code's and Codex's hook input (JSON on stdin) -> session events about compaction.

Both tools send `hook_event_name`, `session_id`, `transcript_path`, `cwd`; PreCompact / PostCompact add `trigger`
(manual | auto). Codex's own input (codex-rs/hooks/schema/generated/*.command.input.schema.json) also carries
`turn_id` and `model`, and `transcript_path` may be null. Derived:
- PreCompact -> `compaction_started`; PostCompact -> `compaction_completed`. SessionStart with source `compact`
  follows the same compaction's PostCompact in Claude Code, so it derives nothing (it would complete it twice).
- Trigger mode: `manual` is manual (/compact, `thread/compact/start`); `auto` is `request_start`, since both tools
  compact automatically before sending the request that would not fit (the hook input says no more about where).
- Stop and every other hook: no event. What the hooks answer the tool is reporter/hooks/actions.py's.
- A subagent's hook (its input names an `agent_id`: Codex's subagent fields, Claude Code's inside a subagent): no
  event and no answer. Its context is the subagent's own, not the thread's (the transcript readers skip sidechains
  for the same reason).

A hook's input carries no time: the event is stamped with its arrival. Its id is derived from the input itself, so
the same input delivered twice is one event (consumers drop repeated ids).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas import TriggerMode
from schemas.session_events import CompactionCompleted, CompactionStarted, SessionEvent

PRE_COMPACT = "PreCompact"
POST_COMPACT = "PostCompact"


@dataclass(frozen=True)
class HookInput:
    event_name: str
    session_id: str
    cwd: str | None
    transcript_path: str | None
    trigger: str | None
    source: str | None
    raw: bytes
    agent_id: str | None = None

    @property
    def subagent(self) -> bool:
        return self.agent_id is not None


def parse_hook_input(raw: bytes) -> HookInput:
    """Raises ValueError on input that is not a hook's JSON."""
    try:
        data: Any = json.loads(raw)
    except RecursionError as error:  # nested deeper than the parser goes: a hook never fails the agent on its input
        raise ValueError("hook input nested too deeply") from error
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    name, session = data.get("hook_event_name"), data.get("session_id")
    if not isinstance(name, str) or not isinstance(session, str) or not session:
        raise ValueError("hook input needs hook_event_name and session_id")

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    return HookInput(
        name, session, text("cwd"), text("transcript_path"), text("trigger"), text("source"), raw, text("agent_id")
    )


def trigger_mode(trigger: str | None) -> TriggerMode:
    return TriggerMode.MANUAL if trigger == "manual" else TriggerMode.REQUEST_START


def hook_events(hook: HookInput, now: datetime, project_id: str | None = None) -> list[SessionEvent]:
    if hook.subagent:
        return []
    event_id = f"hook-{hashlib.sha256(hook.raw).hexdigest()[:32]}"
    common: dict[str, Any] = {
        "thread_id": hook.session_id,
        "event_id": event_id,
        "occurred_at": now,
        "project_id": project_id,
    }
    if hook.event_name == PRE_COMPACT:
        return [CompactionStarted(trigger_mode=trigger_mode(hook.trigger), **common)]
    if hook.event_name == POST_COMPACT:
        return [CompactionCompleted(trigger_mode=trigger_mode(hook.trigger), **common)]
    return []
