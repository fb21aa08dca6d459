"""`ctxbudget hook`, the command Claude Code and Codex run as hooks, with the input shapes their docs give."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ctxbudget.cli import app
from schemas import SESSION_EVENT_ADAPTER, TriggerMode
from schemas.session_events import CompactionCompleted, CompactionStarted

SESSION = "0f112eb4-a676-476d-8986-d6c78693cd5b"


def test_a_hook_never_fails_on_deeply_nested_input(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    nested = '{"hook_event_name": "PreCompact", "session_id": "s", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    result = CliRunner().invoke(app, ["hook", "--events-file", str(tmp_path / "h.jsonl")], input=nested)
    assert (result.exit_code, result.exception) == (0, None)
    assert "unreadable input" in result.stderr


def _hook(name: str, **extra: str) -> str:
    payload = {"session_id": SESSION, "transcript_path": "/t.jsonl", "cwd": "/home/u/repo", "hook_event_name": name}
    return json.dumps(payload | extra)


def _events(path: Path) -> list:
    return [SESSION_EVENT_ADAPTER.validate_json(line) for line in path.read_bytes().splitlines()]


def test_compaction_hooks_become_session_events(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "hooks.jsonl"
    runner = CliRunner()
    for name, trigger in (("PreCompact", "auto"), ("PostCompact", "auto"), ("PreCompact", "manual")):
        result = runner.invoke(app, ["hook", "--events-file", str(out)], input=_hook(name, trigger=trigger))
        assert (result.exit_code, result.stdout) == (0, "")
    stop = runner.invoke(app, ["hook", "--events-file", str(out)], input=_hook("Stop", stop_hook_active="false"))
    assert (stop.stdout, "not acting" in stop.stderr) == ("", True)  # installed without the API: it says so
    runner.invoke(app, ["hook", "--events-file", str(out)], input=_hook("SessionStart", source="compact"))
    events = _events(out)
    assert [(type(e), e.trigger_mode) for e in events] == [
        (CompactionStarted, TriggerMode.REQUEST_START),
        (CompactionCompleted, TriggerMode.REQUEST_START),
        (CompactionStarted, TriggerMode.MANUAL),
    ]
    assert {e.thread_id for e in events} == {SESSION}


def test_the_same_hook_input_twice_is_one_event(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "hooks.jsonl"
    for _ in range(2):
        CliRunner().invoke(app, ["hook", "--events-file", str(out)], input=_hook("PreCompact", trigger="auto"))
    first, second = _events(out)
    assert first.event_id == second.event_id


def _codex_compact(name: str, trigger: str) -> str:
    """Codex's own PreCompact / PostCompact input (codex-rs/hooks/schema/generated/pre-compact.command.input
    .schema.json: every field required; `transcript_path` may be null)."""
    return json.dumps(
        {
            "session_id": "019c8a59-e9dd-71f0-9ae3-4079fe9726a9",
            "turn_id": "019c8a5a-0000-7000-8000-000000000001",
            "transcript_path": None,
            "cwd": "/home/u/repo",
            "hook_event_name": name,
            "model": "gpt-5.3-codex",
            "trigger": trigger,
        }
    )


def test_codex_compaction_hooks_become_session_events(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "hooks.jsonl"
    for name, trigger in (("PreCompact", "manual"), ("PostCompact", "manual"), ("PreCompact", "auto")):
        args = ["hook", "--tool", "codex", "--events-file", str(out)]
        result = CliRunner().invoke(app, args, input=_codex_compact(name, trigger))
        assert (result.exit_code, result.stdout) == (0, "")
    events = _events(out)
    assert [(type(e), e.trigger_mode) for e in events] == [
        (CompactionStarted, TriggerMode.MANUAL),
        (CompactionCompleted, TriggerMode.MANUAL),
        (CompactionStarted, TriggerMode.REQUEST_START),
    ]
    assert {e.thread_id for e in events} == {"019c8a59-e9dd-71f0-9ae3-4079fe9726a9"}
