"""What a hook answers the agent tool while its thread owes a handoff (issue 23, spec 1.3, 8.3, 9.5). Pure.

The thread a hook speaks of is its `session_id`: Claude Code's transcripts and status line and Codex's rollouts and
app-server name the thread by that same id (reporter/claude_code.py, reporter/codex_rollouts.py), so the hook asks
the API about `session_id` as it is.

Decisions, the same for both tools (only the output format differs, `Tool`):
- Stop and UserPromptSubmit, while a `prepare_handoff` / `pre_compaction_wrap_up` is open and no package is ready
  for the current cycle: tell the agent to write its handoff (Stop: block with the instruction as the reason, which
  the agent reads and acts on; UserPromptSubmit: the instruction as additional context). Once per owed action.
- PreCompact, automatic, without a ready package for the cycle: hold the compaction once per cycle, with the
  instruction as the reason; the next attempt goes through, so a stuck agent never loses its compaction. A manual
  compaction (/compact) is the user's decision and never held.
- SessionStart with a resume prompt (after a compaction, or a relay thread started for a package): the prompt as
  additional context.

Output formats (JSON on stdout, exit 0):
- Claude Code: Stop and PreCompact `{"decision": "block", "reason": ...}` (PreCompact may block since 2.1.105);
  UserPromptSubmit and SessionStart `{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}`.
- Codex (codex-rs/hooks/schema/generated/*.command.output.schema.json): Stop `{"decision": "block", "reason": ...}`
  continues the turn with the reason as its prompt; UserPromptSubmit and SessionStart as Claude Code; PreCompact
  has no `decision` (its schema refuses unknown keys): `{"continue": false, "stopReason": ...}` stops the compaction
  and the turn, and the user sees the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from core.actions import WRAP_UP_ACTIONS
from core.handoff import ready_for_cycle
from reporter.hooks import PRE_COMPACT, HookInput
from schemas import HandoffPackage, MasterActionItem, PackageStatus

STOP = "Stop"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
SESSION_START = "SessionStart"
HELD_NOTE = "ctxbudget held this automatic compaction once; the next one goes through."
HANDOFF_COMMAND = "ctxbudget handoff write --thread {thread_id}"
HANDOFF_SHAPE = (
    '{"summary": "<what was done, where it stands, what the next thread must know>", '
    '"open_questions": ["..."], "next_actions": ["..."], "decision_links": ["..."]}'
)


class Tool(StrEnum):
    CLAUDE = "claude"
    CODEX = "codex"


@dataclass(frozen=True)
class ThreadDuty:
    """What the API says the thread owes before its next compaction."""

    thread_id: str
    owed_action_ids: tuple[str, ...]
    """Open `prepare_handoff` / `pre_compaction_wrap_up` actions of the current cycle."""
    ready: bool
    """A ready package exists for the current cycle."""
    cycle: str
    """The current compaction cycle (a new one begins at each compaction)."""


def package_to_check(detail: dict[str, Any]) -> str | None:
    """The package whose cycle decides `ready`: only a ready one can be (the detail says its status, not its age)."""
    ready = detail.get("handoff_package_status") == PackageStatus.READY.value
    return detail.get("handoff_package_id") if ready else None


def thread_duty(detail: dict[str, Any], package: HandoffPackage | None) -> ThreadDuty:
    """From the 6.3 detail (`GET .../context-budget`) and the package `package_to_check` named, fetched."""
    items = [MasterActionItem.model_validate_json(json.dumps(item)) for item in detail.get("open_master_actions") or []]
    last_compaction = detail.get("last_compaction_at")
    last_compaction_at = datetime.fromisoformat(last_compaction) if last_compaction else None
    return ThreadDuty(
        thread_id=detail["thread_id"],
        owed_action_ids=tuple(item.action_id for item in items if item.open and item.action in WRAP_UP_ACTIONS),
        ready=ready_for_cycle(package, last_compaction_at),
        cycle=f"{detail.get('compaction_count', 0)}|{last_compaction or ''}",
    )


@dataclass
class HookMemory:
    """What the hooks already did, so each is done once: actions the agent was told about, and the cycle in which
    each thread's automatic compaction was held."""

    told: dict[str, str] = field(default_factory=dict)
    """action id -> thread id."""
    held: dict[str, str] = field(default_factory=dict)
    """thread id -> cycle."""


@dataclass(frozen=True)
class HookAnswer:
    output: dict[str, Any] | None = None
    """The JSON to print for the tool; None: nothing to say, the tool goes on."""
    told: tuple[str, ...] = ()
    """Owed actions this answer tells the agent about (remember them)."""
    held_cycle: str | None = None
    """The cycle whose automatic compaction this answer holds (remember it)."""


def instruction(thread_id: str) -> str:
    return (
        "ctxbudget: this thread owes a handoff before its context is compacted, and no handoff package is ready "
        "yet. Finish the step you are in, then write your handoff now: run "
        f"`{HANDOFF_COMMAND.format(thread_id=thread_id)}` with this JSON on stdin: {HANDOFF_SHAPE}. "
        "The worker adds the files, patches, commands and tests itself; write only what you alone know."
    )


def decide(tool: Tool, hook: HookInput, duty: ThreadDuty | None, memory: HookMemory) -> HookAnswer:
    """The answer to a Stop, UserPromptSubmit or PreCompact hook (see the module docstring)."""
    if duty is None or duty.ready:
        return HookAnswer()
    if hook.event_name == PRE_COMPACT:
        if hook.trigger != "auto" or memory.held.get(duty.thread_id) == duty.cycle:
            return HookAnswer()
        reason = f"{HELD_NOTE} {instruction(hook.session_id)}"
        if tool is Tool.CODEX:
            return HookAnswer({"continue": False, "stopReason": reason}, held_cycle=duty.cycle)
        return HookAnswer({"decision": "block", "reason": reason}, held_cycle=duty.cycle)
    untold = tuple(action for action in duty.owed_action_ids if action not in memory.told)
    if not untold:
        return HookAnswer()
    if hook.event_name == STOP:
        return HookAnswer({"decision": "block", "reason": instruction(hook.session_id)}, told=untold)
    if hook.event_name == USER_PROMPT_SUBMIT:
        return HookAnswer(additional_context(USER_PROMPT_SUBMIT, instruction(hook.session_id)), told=untold)
    return HookAnswer()


def additional_context(event_name: str, text: str) -> dict[str, Any]:
    """Context for the agent, in the format both tools read for UserPromptSubmit and SessionStart."""
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}


def remember(memory: HookMemory, thread_id: str, answer: HookAnswer) -> bool:
    """Records what `answer` did; False when there was nothing to record."""
    for action in answer.told:
        memory.told[action] = thread_id
    if answer.held_cycle is not None:
        memory.held[thread_id] = answer.held_cycle
    return bool(answer.told) or answer.held_cycle is not None
