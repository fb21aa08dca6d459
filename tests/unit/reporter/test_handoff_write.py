"""`ctxbudget handoff write`: the agent's part on stdin + git facts -> draft then ready, posted; kept when not taken."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from ctxbudget.cli import app
from reporter.agent_handoff import AgentHandoff
from reporter.handoff_write import WRITE_OUTBOX_NAME, InboxAsker, RelayPaths
from schemas import HandoffPackage, MasterAction, PackageStatus

ACCEPTED = (202, {"Content-Type": "application/json"}, b'{"accepted": true}')
PART = {
    "summary": "Half the parser is done.",
    "open_questions": ["q?"],
    "next_actions": ["finish"],
    "decision_links": [],
}


def repo_with_a_change(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "parser.py").write_text("x = 1\n")
    return repo


def run_write(tmp_path: Path, url: str, stdin: str, monkeypatch) -> object:
    monkeypatch.setattr("reporter.http_delivery.RetryPolicy.attempts", 1)
    args = ["handoff", "write", "--thread", "thr-1", "--project-id", "proj-1", "--api-url", url]
    args += ["--cwd", str(repo_with_a_change(tmp_path)), "--spool-dir", str(tmp_path / "spool")]
    return CliRunner().invoke(app, args, input=stdin)


def test_the_agents_part_and_the_worktree_go_out_as_draft_then_ready(tmp_path, serve, monkeypatch) -> None:
    api = serve([ACCEPTED])
    result = run_write(tmp_path, api.url, json.dumps(PART), monkeypatch)
    assert result.exit_code == 0, result.output
    assert [path for path, _, _ in api.requests] == ["/api/v1/threads/thr-1/handoff-packages"] * 2
    draft, ready = (HandoffPackage.model_validate_json(body) for _, _, body in api.requests)
    assert (draft.package_status, ready.package_status) == (PackageStatus.DRAFT, PackageStatus.READY)
    assert ready.critical_files == ["parser.py"]
    assert ready.open_questions == ["q?"]
    assert ready.summary_text.startswith("Half the parser is done.")
    assert Path(ready.critical_artifacts[-1]).read_text().startswith("diff --git")
    inbox = RelayPaths(tmp_path / "spool").inbox("thr-1")
    assert AgentHandoff.model_validate_json(inbox.read_bytes()).summary == PART["summary"]


def test_a_part_not_in_the_shape_is_refused_with_the_reason_and_nothing_is_posted(tmp_path, serve, monkeypatch) -> None:
    api = serve([ACCEPTED])
    result = run_write(tmp_path, api.url, '{"summary": "x", "next": []}', monkeypatch)
    assert result.exit_code == 2
    assert "not the handoff shape" in result.output
    assert api.requests == []


def test_an_unreachable_api_keeps_both_versions_for_the_next_run(tmp_path, serve, monkeypatch) -> None:
    monkeypatch.setattr("reporter.http_delivery.RetryDelays.delay", lambda self, attempt, retry_after: 0.0)
    api = serve([ACCEPTED])
    api.down = True
    result = run_write(tmp_path, api.url, json.dumps(PART), monkeypatch)
    assert result.exit_code == 1
    assert "2 versions kept" in result.output
    owed = RelayPaths(tmp_path / "spool").outbox(WRITE_OUTBOX_NAME).owed()
    assert [o.package.package_status for o in owed if o.package] == [PackageStatus.DRAFT, PackageStatus.READY]


async def test_the_inbox_asker_takes_an_answer_written_after_it_asked(tmp_path) -> None:
    paths = RelayPaths(tmp_path)
    old = paths.inbox("thr-1")
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({**PART, "summary": "stale"}))
    os.utime(old, (1, 1))  # written long before the question
    asker = InboxAsker(paths, poll_seconds=0.01)
    question = asyncio.create_task(asker.ask("thr-1", MasterAction.PREPARE_HANDOFF))
    await asyncio.sleep(0.05)
    assert not question.done()
    old.write_text(json.dumps(PART))
    answer = await asyncio.wait_for(question, 5)
    assert answer is not None
    assert answer.summary == PART["summary"]
