"""What a hook answers the agent tool while its thread owes a handoff (issue 23, spec 1.3, 8.3, 9.5). Pure.

The thread a hook speaks of is its `session_id`: Claude Code's transcripts and status line and Codex's rollouts and
app-server name the thread by that same id (reporter/claude_code/transcripts.py, reporter/codex/rollouts.py), so the
hook asks the API about `session_id` as it is.

Decisions, the same for both tools, while a `prepare_handoff` / `pre_compaction_wrap_up` is open and no package is
ready for the current cycle (the agent is told early, mid-turn, and never by holding the compaction):
- PostToolUse (after each tool call, so mid-turn) and UserPromptSubmit: the instruction as additional context, once
  per owed action.
- Stop: block with the instruction as the reason, which the agent reads and acts on (the turn goes on), once per owed
  action, whether or not the context told it already.
- PreCompact: no answer. Holding an automatic compaction costs the user the turn (Claude Code fails it, "Prompt is
  too long"; Codex's `continue: false` ends it) and never reaches the agent: the handoff must come before.
- SessionStart with a resume prompt (after a compaction, or a relay thread started for a package): the prompt as
  additional context.

The instruction names the ctxbudget program by absolute path (the agent's shell may not have its directory on PATH:
Codex runs commands in `bash -lc`) and the API's URL when the hook got it from `--api-url` rather than the
environment; never the token, which `handoff write` reads from the tool's environment as the hook does.

Output formats (JSON on stdout, exit 0), the same for both tools (Claude Code's hooks reference; Codex:
codex-rs/hooks/schema/generated/*.command.output.schema.json, those of 0.169.0 checked in its binary): Stop
`{"decision": "block", "reason": ...}`; PostToolUse, UserPromptSubmit and SessionStart
`{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from core.actions import WRAP_UP_ACTIONS
from core.handoff import ready_for_cycle
from reporter.hooks.payload import HookInput
from reporter.relay.inbox import cycle_of
from schemas import HandoffPackage, MasterActionItem, PackageStatus

STOP = "Stop"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
SESSION_START = "SessionStart"
POST_TOOL_USE = "PostToolUse"
CONTEXT_EVENTS = frozenset({USER_PROMPT_SUBMIT, POST_TOOL_USE})
HANDOFF_SHAPE = (
    '{"summary": "<what was done, where it stands, what the next thread must know>", '
    '"open_questions": ["..."], "next_actions": ["..."], "decision_links": ["..."]}'
)


@dataclass(frozen=True)
class ThreadDuty:
    """What the API says the thread owes before its next compaction."""

    thread_id: str
    owed_action_ids: tuple[str, ...]
    """Open `prepare_handoff` / `pre_compaction_wrap_up` actions of the current cycle."""
    ready: bool
    """A ready package exists for the current cycle."""


def package_to_check(detail: dict[str, Any]) -> str | None:
    """The package whose cycle decides `ready`: only a ready one can be (the detail says its status, not its age)."""
    ready = detail.get("handoff_package_status") == PackageStatus.READY.value
    return detail.get("handoff_package_id") if ready else None


def thread_duty(detail: dict[str, Any], package: HandoffPackage | None) -> ThreadDuty:
    """From the 6.3 detail (`GET .../context-budget`) and the package `package_to_check` named, fetched."""
    items = [MasterActionItem.model_validate_json(json.dumps(item)) for item in detail.get("open_master_actions") or []]
    return ThreadDuty(
        thread_id=detail["thread_id"],
        owed_action_ids=tuple(item.action_id for item in items if item.open and item.action in WRAP_UP_ACTIONS),
        ready=ready_for_cycle(package, cycle_of(detail).last_compaction_at),
    )


@dataclass
class HookMemory:
    """What the hooks already did, so each is done once: actions the agent was told of in its context, and actions
    whose Stop was blocked."""

    told: dict[str, str] = field(default_factory=dict)
    """action id -> thread id."""
    blocked: dict[str, str] = field(default_factory=dict)
    """action id -> thread id."""


@dataclass(frozen=True)
class HookAnswer:
    output: dict[str, Any] | None = None
    """The JSON to print for the tool; None: nothing to say, the tool goes on."""
    told: tuple[str, ...] = ()
    """Owed actions this answer tells the agent about (remember them)."""
    blocked: tuple[str, ...] = ()
    """Owed actions whose Stop this answer blocks (remember them)."""


def handoff_command(program: str, thread_id: str, api_url: str | None = None) -> str:
    """The command the agent runs: the program by absolute path, the API's URL when the environment lacks it."""
    url = ["--api-url", api_url] if api_url else []
    return shlex.join([program, "handoff", "write", "--thread", thread_id, *url])


def instruction(command: str) -> str:
    return (
        "ctxbudget: this thread owes a handoff before its context is compacted, and no handoff package is ready "
        f"yet. Finish the step you are in, then write your handoff now: run `{command}` with this JSON on stdin: "
        f"{HANDOFF_SHAPE}. The worker adds the files, patches, commands and tests itself; write only what you alone "
        "know."
    )


def decide(hook: HookInput, duty: ThreadDuty | None, memory: HookMemory, command: str) -> HookAnswer:
    """The answer to a Stop, UserPromptSubmit or PostToolUse hook (see the module docstring); `command` is the
    thread's `handoff_command`."""
    if duty is None or duty.ready:
        return HookAnswer()
    if hook.event_name == STOP:
        unblocked = tuple(action for action in duty.owed_action_ids if action not in memory.blocked)
        if not unblocked:
            return HookAnswer()
        return HookAnswer({"decision": "block", "reason": instruction(command)}, told=unblocked, blocked=unblocked)
    if hook.event_name in CONTEXT_EVENTS:
        untold = tuple(action for action in duty.owed_action_ids if action not in memory.told)
        if untold:
            return HookAnswer(additional_context(hook.event_name, instruction(command)), told=untold)
    return HookAnswer()


def additional_context(event_name: str, text: str) -> dict[str, Any]:
    """Context for the agent, in the format both tools read for PostToolUse, UserPromptSubmit and SessionStart."""
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}


def remember(memory: HookMemory, thread_id: str, answer: HookAnswer) -> bool:
    """Records what `answer` did; False when there was nothing to record."""
    for action in answer.told:
        memory.told[action] = thread_id
    for action in answer.blocked:
        memory.blocked[action] = thread_id
    return bool(answer.told or answer.blocked)
