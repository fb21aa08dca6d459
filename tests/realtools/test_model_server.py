"""The scripted model's rules, read from requests shaped as Claude Code 2.1.328 and Codex 0.169.0 send them."""

from __future__ import annotations

import json

from reporter.hooks.actions import handoff_command, instruction
from reporter.relay.agent_handoff import ask_text
from tests.realtools.model_server import (
    Conversation,
    Kind,
    Script,
    anthropic_conversation,
    next_move,
    openai_conversation,
    pending_instruction,
    shell_tool,
    summary_text,
)

SCRIPT = Script(steps_per_turn=2)


def claude_call(command: str) -> list[dict]:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def test_an_instruction_in_a_stop_hook_reminder_is_obeyed_once() -> None:
    said = instruction(handoff_command("ctxbudget", "abc"))
    told = f'<system-reminder>\nStop hook blocking error from command: "hook": {said}</system-reminder>'
    messages = [{"role": "user", "content": "work"}, *claude_call("ls"), {"role": "user", "content": told}]
    kind, command, instructed = next_move(anthropic_conversation({"messages": messages}), SCRIPT, compaction=False)
    assert kind is Kind.OBEY
    assert instructed == "ctxbudget handoff write --thread abc"
    assert command is not None
    assert command.startswith("ctxbudget handoff write --thread abc <<'CTXBUDGET_HANDOFF'\n")
    handoff = json.loads(command.splitlines()[1])
    assert set(handoff) == {"summary", "open_questions", "next_actions", "decision_links"}
    # once the call ran, the same instruction is done; a repeat of it later is a new one
    done = anthropic_conversation({"messages": [*messages, *claude_call(command)]})
    assert pending_instruction(done) is None
    again = anthropic_conversation({"messages": [*messages, *claude_call(command), {"role": "user", "content": told}]})
    assert pending_instruction(again) == "ctxbudget handoff write --thread abc"


def test_the_turn_ends_after_its_steps_and_a_summary_carries_them_over() -> None:
    messages = [{"role": "user", "content": "work"}, *claude_call("a"), *claude_call("b")]
    conversation = anthropic_conversation({"messages": messages})
    assert next_move(conversation, SCRIPT, compaction=False)[0] is Kind.END_TURN
    assert next_move(anthropic_conversation({"messages": messages[:3]}), SCRIPT, compaction=False)[0] is Kind.STEP
    # a compaction mid-turn drops the calls; the summary says how many the turn had
    summary = summary_text(conversation, SCRIPT.handoff)
    after = anthropic_conversation({"messages": [{"role": "user", "content": summary}]})
    assert after.calls_since_user_text == 2
    assert next_move(after, SCRIPT, compaction=False)[0] is Kind.END_TURN


def test_a_summary_after_an_obeyed_instruction_keeps_codex_from_obeying_again() -> None:
    """Codex keeps user messages (a Stop hook's reason among them) across a compaction, not the tool calls."""
    told = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": instruction(handoff_command("ctxbudget", "t"))}],
    }
    call = {
        "type": "function_call",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": "x handoff write --thread t"}),
    }
    before = openai_conversation({"input": [told, call]})
    summary = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": summary_text(before, SCRIPT.handoff)}],
    }
    assert pending_instruction(openai_conversation({"input": [told, summary]})) is None
    assert pending_instruction(openai_conversation({"input": [told]})) == "ctxbudget handoff write --thread t"


def test_usage_climbs_with_the_assistant_turns_of_the_request() -> None:
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "work"}]}]
    for n in range(3):
        items += [
            {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": f"c{n}"})},
            {"type": "function_call_output", "output": "ok"},
        ]
    conversation = openai_conversation({"input": items})
    assert conversation == Conversation(conversation.events, 3, "work", 3)
    assert Script(base_tokens=1000, tokens_per_step=10).usage_tokens(conversation.assistant_turns) == 1030


def test_the_shell_tool_is_the_one_codex_declares() -> None:
    exec_command = {"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {}}}}
    shell = {"type": "function", "name": "shell", "parameters": {"properties": {"command": {"type": "array"}}}}
    assert shell_tool([{"type": "custom", "name": "apply_patch"}, exec_command]) == ("exec_command", "cmd")
    assert shell_tool([shell]) == ("shell", "argv")


def _user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_question_steered_into_the_turn_is_answered_once_and_the_turn_keeps_its_steps() -> None:
    """The reporter, as Codex's app-server client, steers its question into the running turn: the answer is the
    handoff JSON and the turn goes on (a steer starts no turn); a compaction after it neither asks again nor restarts
    the turn (Codex keeps the user messages, the steer among them, and drops the answer)."""
    script = Script(steps_per_turn=4)
    call = {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": "ls"})}
    asked = [_user("work"), call, call, _user(ask_text("prepare_handoff"))]
    kind, command, _ = next_move(openai_conversation({"input": asked}), script, compaction=False)
    assert (kind, command is not None) == (Kind.ANSWER, True)
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": json.dumps(script.handoff)}],
    }
    before = openai_conversation({"input": [*asked, answer, call]})
    assert before.calls_since_user_text == 3
    summary = _user(summary_text(before, script.handoff))
    after = openai_conversation({"input": [_user("work"), _user(ask_text("prepare_handoff")), summary]})
    assert after.calls_since_user_text == 3
    assert next_move(after, script, compaction=False)[0] is Kind.STEP
    assert next_move(openai_conversation({"input": [*asked, answer, call, call]}), script, compaction=False)[0] is (
        Kind.END_TURN
    )
