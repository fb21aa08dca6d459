"""Recorded hook payloads of Claude Code and Codex replayed through `ctxbudget hook` against a stand-in API: what
the agent is told while its thread owes a handoff (mid-turn, at its Stop, never by holding a compaction), the next
thread resumed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ctxbudget.cli import app
from reporter.codex.rollouts import _FILE_THREAD_ID
from schemas import SESSION_EVENT_ADAPTER, MasterAction, PackageStatus
from schemas.session_events import CompactionStarted
from tests.unit.reporter.budget_fake import NOW, FakeBudgetApi, sample_package

DATA = Path(__file__).parents[3] / "data"
CLAUDE_STOP = (DATA / "claude_code" / "ccboard-hook-stop.json").read_text()
CODEX_STOP = (DATA / "codex" / "ccboard-0161-hook_Stop.json").read_text()
CODEX_PROMPT = (DATA / "codex" / "ccboard-0161-hook_UserPromptSubmit.json").read_text()
CODEX_START = (DATA / "codex" / "ccboard-0161-hook_SessionStart.json").read_text()
CLAUDE_SESSION = json.loads(CLAUDE_STOP)["session_id"]
PROGRAM = "/opt/venv/bin/ctxbudget"
CODEX_SESSION = json.loads(CODEX_STOP)["session_id"]


def _like(recorded: str, **fields: object) -> str:
    """A payload of another event of the same session, built on a recorded one (none of PreCompact / PostCompact /
    SessionStart compact is published; their fields are those of Claude Code's docs and Codex's input schemas)."""
    base = {k: v for k, v in json.loads(recorded).items() if k in ("session_id", "transcript_path", "cwd", "model")}
    if "turn_id" in recorded:
        base["turn_id"] = json.loads(recorded)["turn_id"]
    return json.dumps(base | fields)


def _pre_compact(recorded: str, trigger: str = "auto") -> str:
    return _like(recorded, hook_event_name="PreCompact", trigger=trigger)


@pytest.fixture
def api() -> Iterator[FakeBudgetApi]:
    yield from FakeBudgetApi().serve()


@pytest.fixture
def run(api: FakeBudgetApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("CTXBUDGET_RESUME_PACKAGE", raising=False)
    monkeypatch.delenv("CTXBUDGET_API_URL", raising=False)
    monkeypatch.setattr("reporter.hooks.commands.default_program", lambda: PROGRAM)

    def invoke(payload: str, *extra: str, env: dict[str, str] | None = None) -> Result:
        args = ["hook", "--api-url", api.url, "--token", "t", "--state-file", str(tmp_path / "hooks-state.json")]
        args += ["--events-file", str(tmp_path / "hooks.jsonl"), *extra]
        result = CliRunner().invoke(app, args, input=payload, env=env)
        assert result.exit_code == 0, result.output  # a hook never fails the agent
        return result

    return invoke


def _answer(result: Result) -> dict | None:
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_the_hook_session_is_the_thread_the_reporter_reports() -> None:
    claude, codex = json.loads(CLAUDE_STOP), json.loads(CODEX_STOP)
    assert Path(claude["transcript_path"]).stem == claude["session_id"]  # the transcript tailer's thread
    assert _FILE_THREAD_ID.search(codex["transcript_path"]).group(1) == codex["session_id"]  # the rollout's thread


def test_stop_tells_the_agent_to_write_its_handoff_once_per_owed_action(api: FakeBudgetApi, run) -> None:
    api.thread(CLAUDE_SESSION)
    api.owe(CLAUDE_SESSION, "act-1")
    first = _answer(run(CLAUDE_STOP))
    assert first is not None
    assert first["decision"] == "block"
    assert f"`{PROGRAM} handoff write --thread {CLAUDE_SESSION} --api-url {api.url}`" in first["reason"]
    for key in ("summary", "open_questions", "next_actions", "decision_links"):
        assert f'"{key}"' in first["reason"]
    assert _answer(run(CLAUDE_STOP)) is None  # blocked once: the agent is not held in a loop
    api.owe(CLAUDE_SESSION, "act-2", MasterAction.PRE_COMPACTION_WRAP_UP)
    assert _answer(run(CLAUDE_STOP))["decision"] == "block"  # a new owed action is told again


def test_codex_stop_and_prompt_submit_in_codex_format(api: FakeBudgetApi, run) -> None:
    api.thread(CODEX_SESSION)
    api.owe(CODEX_SESSION, "act-1")
    prompt = _answer(run(CODEX_PROMPT, "--tool", "codex"))
    assert prompt["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert f"{PROGRAM} handoff write --thread {CODEX_SESSION}" in prompt["hookSpecificOutput"]["additionalContext"]
    assert _answer(run(CODEX_STOP, "--tool", "codex"))["decision"] == "block"  # told, but its Stop is blocked once
    assert _answer(run(CODEX_STOP, "--tool", "codex")) is None


@pytest.mark.parametrize(("payload", "tool"), [(CLAUDE_STOP, "claude"), (CODEX_STOP, "codex")])
def test_after_a_tool_call_the_agent_is_told_mid_turn_once(api: FakeBudgetApi, run, payload: str, tool: str) -> None:
    session = json.loads(payload)["session_id"]
    used = _like(payload, hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="t-1", tool_input={})
    api.thread(session)
    assert _answer(run(used, "--tool", tool)) is None  # nothing owed
    api.owe(session, "act-1")
    context = _answer(run(used, "--tool", tool))["hookSpecificOutput"]
    assert context["hookEventName"] == "PostToolUse"  # both tools' PostToolUse output schema
    assert f"{PROGRAM} handoff write --thread {session}" in context["additionalContext"]
    assert _answer(run(used, "--tool", tool)) is None  # once per owed action


def test_the_url_stays_out_of_the_command_when_the_environment_has_it(api: FakeBudgetApi, run) -> None:
    api.thread(CLAUDE_SESSION)
    api.owe(CLAUDE_SESSION, "act-1")
    reason = _answer(run(CLAUDE_STOP, env={"CTXBUDGET_API_URL": api.url}))["reason"]
    assert f"`{PROGRAM} handoff write --thread {CLAUDE_SESSION}`" in reason
    assert "--token" not in reason  # never the token


def test_nothing_is_said_when_nothing_is_owed_or_a_package_is_ready(api: FakeBudgetApi, run) -> None:
    api.thread(CLAUDE_SESSION)
    assert _answer(run(CLAUDE_STOP)) is None
    api.owe(CLAUDE_SESSION, "act-1")
    api.post_package(sample_package(CLAUDE_SESSION))
    assert _answer(run(CLAUDE_STOP)) is None


@pytest.mark.parametrize(("payload", "tool"), [(CLAUDE_STOP, "claude"), (CODEX_STOP, "codex")])
@pytest.mark.parametrize("trigger", ["auto", "manual"])
def test_a_compaction_is_never_held_even_owing(api: FakeBudgetApi, run, payload: str, tool: str, trigger) -> None:
    session = json.loads(payload)["session_id"]
    api.thread(session)
    api.owe(session, "act-1")
    assert run(_pre_compact(payload, trigger), "--tool", tool).stdout == ""


def test_a_package_of_an_earlier_cycle_is_no_ready_package(api: FakeBudgetApi, run) -> None:
    api.thread(CLAUDE_SESSION)
    api.owe(CLAUDE_SESSION, "act-1")
    api.post_package(
        sample_package(CLAUDE_SESSION, created_at=NOW - timedelta(hours=2), ready_at=NOW - timedelta(hours=2))
    )
    api.owe(CLAUDE_SESSION, "act-2")
    api.thread(CLAUDE_SESSION, compaction_count=1, last_compaction_at=NOW.isoformat())  # compacted since
    assert _answer(run(CLAUDE_STOP))["decision"] == "block"


def test_the_api_down_or_unreachable_lets_the_tool_go_on(api: FakeBudgetApi, run, tmp_path: Path) -> None:
    api.thread(CLAUDE_SESSION)
    api.owe(CLAUDE_SESSION, "act-1")
    api.down = True
    result = run(CLAUDE_STOP)
    assert result.stdout == ""
    assert "lets the tool go on" in result.stderr
    args = ["hook", "--api-url", "http://127.0.0.1:9", "--state-file", str(tmp_path / "s.json")]
    args += ["--events-file", str(tmp_path / "e.jsonl")]
    unreachable = CliRunner().invoke(app, args, input=CLAUDE_STOP)
    assert (unreachable.exit_code, unreachable.stdout) == (0, "")
    assert "could not be asked" in unreachable.stderr


def test_an_unknown_thread_owes_nothing(api: FakeBudgetApi, run) -> None:
    assert _answer(run(CLAUDE_STOP)) is None


def test_compaction_events_are_still_reported_while_acting(api: FakeBudgetApi, run, tmp_path: Path) -> None:
    api.thread(CLAUDE_SESSION)
    run(_pre_compact(CLAUDE_STOP))
    lines = (tmp_path / "hooks.jsonl").read_bytes().splitlines()
    events = [SESSION_EVENT_ADAPTER.validate_json(line) for line in lines]
    assert [(type(e), e.thread_id) for e in events] == [(CompactionStarted, CLAUDE_SESSION)]


def test_after_a_compaction_the_session_resumes_from_its_readysample_package(api: FakeBudgetApi, run) -> None:
    api.thread(CLAUDE_SESSION)
    api.post_package(sample_package(CLAUDE_SESSION))
    started = _answer(run(_like(CLAUDE_STOP, hook_event_name="SessionStart", source="compact")))
    context = started["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert "Parser rewritten" in context["additionalContext"]
    assert "var/handoff/hp-1/uncommitted.patch" in context["additionalContext"]
    assert api.packages[f"hp-{CLAUDE_SESSION[:8]}"].package_status is PackageStatus.READY  # same thread: kept


def test_a_relay_thread_resumes_from_its_package_and_consumes_it(api: FakeBudgetApi, run) -> None:
    api.thread("thread-old")
    package = sample_package("thread-old")
    api.post_package(package)
    env = {"CTXBUDGET_RESUME_PACKAGE": package.handoff_package_id}
    started = _answer(run(CODEX_START, "--tool", "codex", env=env))
    assert "Keep the legacy flag?" in started["hookSpecificOutput"]["additionalContext"]
    consumed = api.packages[package.handoff_package_id]
    assert (consumed.package_status, consumed.to_thread_id) == (PackageStatus.CONSUMED, CODEX_SESSION)
    run(CODEX_START, "--tool", "codex", env=env)  # the same start delivered again: consumed already, not twice
    resumed = _like(CODEX_START, hook_event_name="SessionStart", source="resume")
    assert _answer(run(resumed, "--tool", "codex", env=env)) is None  # a resumed session has its prompt already
    assert [r for r in api.requests if r[0] == "POST"] == [
        ("POST", f"/api/v1/handoff-packages/{package.handoff_package_id}/consume")
    ]


def test_a_session_start_without_a_package_says_nothing(api: FakeBudgetApi, run) -> None:
    assert _answer(run(CODEX_START, "--tool", "codex")) is None
    assert api.requests == []


def test_a_subagents_hooks_neither_act_nor_report(api: FakeBudgetApi, run, tmp_path: Path) -> None:
    api.thread(CODEX_SESSION)
    api.owe(CODEX_SESSION, "act-1")
    subagent = _like(
        CODEX_STOP, hook_event_name="PreCompact", trigger="auto", agent_id="agent-1", agent_type="explorer"
    )
    assert _answer(run(subagent, "--tool", "codex")) is None
    assert api.requests == []
    assert not (tmp_path / "hooks.jsonl").exists()
