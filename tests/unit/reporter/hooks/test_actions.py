"""The hooks' decisions as pure functions: what is owed, what is said, what is remembered."""

from __future__ import annotations

import json

from reporter.hooks import memory as hook_memory
from reporter.hooks.actions import (
    HookMemory,
    ThreadDuty,
    decide,
    handoff_command,
    instruction,
    package_to_check,
    remember,
    thread_duty,
)
from reporter.hooks.payload import parse_hook_input
from tests.unit.reporter.budget_fake import NOW, sample_package

OWING = ThreadDuty(thread_id="s-1", owed_action_ids=("act-1",), ready=False)
COMMAND = handoff_command("/opt/venv/bin/ctxbudget", "s-1")


def _hook(name: str, **fields: str):
    return parse_hook_input(json.dumps({"hook_event_name": name, "session_id": "s-1"} | fields).encode())


def test_the_detail_says_what_is_owed_and_a_stale_package_is_not_ready() -> None:
    item = {
        "action_id": "act-1", "action": "pre_compaction_wrap_up", "state": "acknowledged",
        "context_budget_level": "critical", "issued_at": "2026-03-25T08:00:00Z",
        "state_changed_at": "2026-03-25T08:00:00Z",
    }  # fmt: skip
    other = item | {"action_id": "act-2", "action": "forbid_context_growth"}
    detail = {
        "thread_id": "s-1",
        "compaction_count": 2,
        "last_compaction_at": "2026-03-25T09:00:00Z",
        "handoff_package_id": "hp-1",
        "handoff_package_status": "ready",
        "open_master_actions": [item, other],
    }
    assert package_to_check(detail) == "hp-1"
    duty = thread_duty(detail, sample_package("s-1", created_at=NOW, ready_at=NOW))  # made at 08:00, before it
    assert duty == ThreadDuty("s-1", ("act-1",), ready=False)
    assert package_to_check(detail | {"handoff_package_status": "draft"}) is None


def test_no_compaction_is_ever_held() -> None:
    for trigger in ("auto", "manual"):
        assert decide(_hook("PreCompact", trigger=trigger), OWING, HookMemory(), COMMAND).output is None


def test_a_ready_package_or_no_duty_says_nothing_anywhere() -> None:
    ready = ThreadDuty(thread_id="s-1", owed_action_ids=("act-1",), ready=True)
    for name in ("Stop", "UserPromptSubmit", "PostToolUse"):
        for duty in (ready, None):
            assert decide(_hook(name), duty, HookMemory(), COMMAND).output is None


def test_the_agent_is_told_mid_turn_once_and_its_stop_is_still_blocked_once() -> None:
    memory = HookMemory()
    told = decide(_hook("PostToolUse"), OWING, memory, COMMAND)
    assert told.output == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": instruction(COMMAND)}
    }
    assert remember(memory, "s-1", told)
    assert memory.told == {"act-1": "s-1"}
    assert decide(_hook("PostToolUse"), OWING, memory, COMMAND).output is None
    assert decide(_hook("UserPromptSubmit"), OWING, memory, COMMAND).output is None
    stop = decide(_hook("Stop"), OWING, memory, COMMAND)
    assert stop.output == {"decision": "block", "reason": instruction(COMMAND)}
    remember(memory, "s-1", stop)
    assert decide(_hook("Stop"), OWING, memory, COMMAND).output is None  # never a loop
    assert not remember(memory, "s-1", decide(_hook("PostCompact", trigger="auto"), OWING, memory, COMMAND))


def test_the_command_names_the_program_by_path_and_the_url_only_when_given() -> None:
    assert handoff_command("/opt/venv/bin/ctxbudget", "s 1") == "/opt/venv/bin/ctxbudget handoff write --thread 's 1'"
    with_url = handoff_command("/opt/venv/bin/ctxbudget", "s-1", "http://api:8000")
    assert with_url == "/opt/venv/bin/ctxbudget handoff write --thread s-1 --api-url http://api:8000"
    assert "token" not in with_url.lower()


def test_the_memory_survives_on_disk_stays_bounded_and_an_unreadable_one_starts_empty(tmp_path) -> None:
    path = tmp_path / "hooks-state.json"
    with hook_memory.updating(path) as (memory, save):
        memory.told.update({f"act-{i}": "s-1" for i in range(hook_memory.MAX_ENTRIES + 5)})
        memory.blocked["act-0"] = "s-1"
        save()
    loaded = hook_memory.load(path)
    assert len(loaded.told) == hook_memory.MAX_ENTRIES
    assert "act-0" not in loaded.told  # the oldest go first
    assert f"act-{hook_memory.MAX_ENTRIES + 4}" in loaded.told
    assert loaded.blocked == {"act-0": "s-1"}
    path.write_text("{not json")
    assert hook_memory.load(path) == HookMemory()
