"""Session events and shell commands from one Codex rollout record (the seed-003 projection's input for Codex threads).

As Codex writes them (tests/data/codex, openai/codex `codex-rs/protocol`):
- `response_item` `message` (user / assistant / developer): `message_added` with its text's estimate;
- `response_item` `function_call` / `custom_tool_call` / `local_shell_call`: the call joins the surface as an
  assistant message; `function_call_output` / `custom_tool_call_output`: `tool_result_added`, named by its call, and
  `truncated` when Codex cut the output short (it writes `…N tokens truncated…` or `…N chars truncated…` in place of
  the middle);
- shell commands: `exec_command` (`{"cmd": ...}`), `shell` / `shell_command` (`{"command": [...] | "..."}`) function
  calls and `local_shell_call` actions; a command finished when `event_msg` `exec_command_end` gives its `exit_code`,
  or its output says `Process exited with code N` / `Exit code: N` (an `exec_command` still running answers with a
  session id instead, and stays running).
`event_msg` `user_message` / `agent_message` repeat the response items for display and add nothing. Reasoning items
of earlier turns are not carried into the next request and are not counted.

Sizes are estimates (`session_events.estimate_tokens`); usage samples anchor them. Rollout records carry no id: event
ids come from the thread and the line's end offset, so a re-read yields the same events.
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime
from typing import Any

from reporter.session_events import estimate_tokens
from schemas import MessageRole
from schemas.session_events import MessageAdded, SessionEvent, ToolResultAdded

SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "container.exec"})
EDIT_TOOLS = frozenset({"apply_patch"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_ROLES = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT, "developer": MessageRole.DEVELOPER}
_TRUNCATED = re.compile(r"…\d+ (tokens|chars) truncated…")
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def event_id(thread_id: str, end_offset: int, suffix: str) -> str:
    return f"cx-{thread_id}-{end_offset}-{suffix}"


def content_text(content: Any) -> str:
    """The text of a message's content or a tool output: a string, or a list of `{type, text}` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    if isinstance(content, dict):  # older shell outputs: {"output": ..., "metadata": ...}
        return content_text(content.get("output"))
    return ""


def call_text(payload: dict[str, Any]) -> str:
    body = payload.get("arguments") or payload.get("input") or payload.get("action") or ""
    return f"{payload.get('name') or payload.get('type')} {body if isinstance(body, str) else json.dumps(body)}"


def call_names(kind: str, payload: dict[str, Any]) -> dict[str, str]:
    if kind != "response_item" or payload.get("type") not in CALL_TYPES or not payload.get("call_id"):
        return {}
    return {str(payload["call_id"]): str(payload.get("name") or "shell")}


def surface_events(
    kind: str, payload: dict[str, Any], thread_id: str, end_offset: int, at: datetime, tool_names: dict[str, str]
) -> list[SessionEvent]:
    if kind != "response_item":
        return []
    item = payload.get("type")
    base = {"thread_id": thread_id, "event_id": event_id(thread_id, end_offset, "m"), "occurred_at": at}
    if item == "message" and (role := _ROLES.get(str(payload.get("role")))) is not None:
        text = content_text(payload.get("content"))
        return [MessageAdded(**base, role=role, token_count=estimate_tokens(text))] if text else []
    if item in CALL_TYPES:
        return [MessageAdded(**base, role=MessageRole.ASSISTANT, token_count=estimate_tokens(call_text(payload)))]
    if item in OUTPUT_TYPES:
        text = content_text(_parsed(payload.get("output")))
        return [
            ToolResultAdded(
                **base | {"event_id": event_id(thread_id, end_offset, "t")},
                tool_name=tool_names.get(str(payload.get("call_id")), "tool"),
                token_count=estimate_tokens(text),
                truncated=bool(_TRUNCATED.search(text)),
            )
        ]
    return []


def _parsed(output: Any) -> Any:
    """Older shell tools wrote their output as a JSON string `{"output": ..., "metadata": {"exit_code": ...}}`."""
    if isinstance(output, str) and output.startswith("{"):
        try:
            return json.loads(output)
        except ValueError:
            return output
    return output


def _command_of(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None  # e.g. a published file's redacted arguments
    if not isinstance(arguments, dict):
        return None
    command = arguments.get("cmd", arguments.get("command"))
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        # `["bash", "-lc", "pytest -q"]`: the script is what ran
        return command[2] if len(command) >= 3 and command[1] in ("-lc", "-c") else shlex.join(command)
    return command if isinstance(command, str) and command else None


def shell_commands(kind: str, payload: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, command) of a shell call record."""
    if kind != "response_item" or not payload.get("call_id"):
        return []
    item = payload.get("type")
    if item == "function_call" and payload.get("name") in SHELL_TOOLS:
        command = _command_of(payload.get("arguments"))
    elif item == "local_shell_call":
        command = _command_of(payload.get("action"))
    else:
        return []
    return [(str(payload["call_id"]), command)] if command else []


def command_outcomes(kind: str, payload: dict[str, Any]) -> list[tuple[str, bool]]:
    """(call id, failed) of commands a record says finished."""
    call_id = payload.get("call_id")
    if not call_id:
        return []
    if kind == "event_msg" and payload.get("type") == "exec_command_end" and type(payload.get("exit_code")) is int:
        return [(str(call_id), payload["exit_code"] != 0)]
    if kind == "response_item" and payload.get("type") in OUTPUT_TYPES:
        output = _parsed(payload.get("output"))
        if isinstance(output, str) and (match := _EXIT_CODE.search(output)) is not None:
            return [(str(call_id), int(match.group(1)) != 0)]
        metadata = output.get("metadata") if isinstance(output, dict) else None
        if isinstance(metadata, dict) and type(metadata.get("exit_code")) is int:
            return [(str(call_id), metadata["exit_code"] != 0)]
    return []


def replacement_tokens(payload: dict[str, Any]) -> int | None:
    """The size of what a `compacted` record put in place of the history (its replacement history and message);
    None when the record does not carry it (a compaction item's content is encrypted)."""
    history = payload.get("replacement_history")
    parts = [content_text(item.get("content")) for item in history if isinstance(item, dict)] if history else []
    text = "".join(parts) + str(payload.get("message") or "")
    return estimate_tokens(text) if text else None


def edits(kind: str, payload: dict[str, Any]) -> bool:
    """The record calls Codex's file-editing tool (`apply_patch`, a custom or function call)."""
    return kind == "response_item" and payload.get("type") in CALL_TYPES and payload.get("name") in EDIT_TOOLS
