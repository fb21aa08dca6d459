"""`ctxbudget statusline`, the command Claude Code runs for its status line, with the input its docs give."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ctxbudget.cli import app
from tests.unit.reporter.conftest import OK

SESSION = "0f112eb4-a676-476d-8986-d6c78693cd5b"


def _status(current_usage: dict | None, used_pct: float | None = 20.0) -> str:
    return json.dumps(
        {
            "hook_event_name": "Status",
            "session_id": SESSION,
            "transcript_path": f"/home/u/.claude/projects/-home-u-repo/{SESSION}.jsonl",
            "cwd": "/home/u/repo",
            "model": {"id": "claude-opus-4-5-20251101", "display_name": "Opus 4.5"},
            "workspace": {"current_dir": "/home/u/repo", "project_dir": "/home/u/repo"},
            "version": "2.1.140",
            "context_window": {
                "context_window_size": 200_000,
                "used_percentage": used_pct,
                "remaining_percentage": None if used_pct is None else 100 - used_pct,
                "current_usage": current_usage,
            },
        }
    )


USAGE = {
    "input_tokens": 8,
    "cache_creation_input_tokens": 1_992,
    "cache_read_input_tokens": 38_000,
    "output_tokens": 90,
}


def test_the_status_line_shows_both_percents(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["statusline"], input=_status(USAGE))
    assert result.exit_code == 0, result.output
    line = result.stdout.splitlines()[0]
    budget = (177_000 - 40_090) / 177_000 * 100  # Claude Code compares prompt + output with its point
    assert line == f"claude-opus-4-5-20251101 · ctx 40k · 80% left · {budget:.0f}% before compaction"


def test_no_usage_right_after_compact_is_said_not_guessed() -> None:
    result = CliRunner().invoke(app, ["statusline"], input=_status(None, None))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "claude-opus-4-5-20251101 · ctx: no usage yet"


def test_bad_input_still_prints_a_line_and_exits_0() -> None:
    for bad in ("not json", "[" * 100_000):  # nested deeper than the JSON parser goes: no RecursionError
        result = CliRunner().invoke(app, ["statusline"], input=bad)
        assert (result.exit_code, result.stdout.splitlines()[0]) == (0, "ctx: ?")


def test_the_status_line_reports_the_thread(tmp_path: Path, serve) -> None:
    api = serve([OK])
    args = ["statusline", "--api-url", api.url, "--spool-dir", str(tmp_path / "spool"), "--project-id", "proj-1"]
    result = CliRunner().invoke(app, args, input=_status(USAGE))
    assert result.exit_code == 0, result.output
    assert len(api.requests) == 1
    body = json.loads(api.requests[0][2])
    assert (body["thread_id"], body["source_kind"], body["agent_tool"]) == (SESSION, "worker_estimator", "claude-code")
    assert body["shown_remaining_pct"] == 80.0
    assert body["context_budget_remaining_pct"] == (177_000 - 40_090) / 177_000 * 100


def test_the_status_line_reports_at_most_at_the_cadence_but_prints_every_time(tmp_path: Path, serve) -> None:
    api = serve([OK, OK, OK])
    args = ["statusline", "--api-url", api.url, "--spool-dir", str(tmp_path / "spool")]
    lines = []
    for usage in (USAGE, USAGE | {"cache_read_input_tokens": 39_000}, USAGE | {"cache_read_input_tokens": 150_000}):
        result = CliRunner().invoke(app, args, input=_status(usage))
        assert result.exit_code == 0, result.output
        lines.append(result.stdout.splitlines()[0])
    assert len(set(lines)) == 3  # printed each time, with each update's figures
    # the second update changed nothing significant within the safe level's 30 s; the third changed the level
    assert [json.loads(r[2])["context_budget_level"] for r in api.requests] == ["safe", "critical"]


def test_report_due_follows_spec_5_1() -> None:
    from datetime import UTC, datetime, timedelta

    from reporter.claude_code.statusline import LastReport, report_due
    from schemas import ContextBudgetLevel

    now = datetime(2026, 12, 1, tzinfo=UTC)
    watch = LastReport(at=now, level=ContextBudgetLevel.WATCH)
    assert report_due(None, ContextBudgetLevel.SAFE, now)
    assert not report_due(watch, ContextBudgetLevel.WATCH, now + timedelta(seconds=14))
    assert report_due(watch, ContextBudgetLevel.WATCH, now + timedelta(seconds=15))
    assert report_due(watch, ContextBudgetLevel.URGENT, now + timedelta(seconds=1))
