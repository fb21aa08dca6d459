"""`ctxbudget handoff write`: the agent's part on stdin + git facts -> draft then ready, posted; kept when not taken;
the part left in the shared inbox with its cycle; the project from the API."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxbudget.cli import app
from reporter.relay.inbox import AgentInbox, InboxEntry, ThreadCycle
from reporter.relay.write import WRITE_OUTBOX_NAME, RelayPaths
from reporter.worker_state import HANDOFF_WRITE, INBOX
from schemas import HandoffPackage, PackageStatus
from tests.unit.reporter.budget_fake import FakeBudgetApi

ACCEPTED = (202, {"Content-Type": "application/json"}, b'{"accepted": true}')
PART = {
    "summary": "Half the parser is done.",
    "open_questions": ["q?"],
    "next_actions": ["finish"],
    "decision_links": [],
}


def repo_with_a_change(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    for args in (["init", "-q"], ["config", "user.email", "t@e.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "parser.py").write_text("x = 1\n")
    return repo


def run_write(tmp_path: Path, url: str, stdin: str, monkeypatch, *extra: str) -> object:
    monkeypatch.setattr("reporter.delivery.http.RetryPolicy.attempts", 1)
    args = ["handoff", "write", "--thread", "thr-1", "--project-id", "proj-1", "--api-url", url, *extra]
    return CliRunner().invoke(app, [*args, "--cwd", str(repo_with_a_change(tmp_path))], input=stdin)


def test_the_agents_part_and_the_worktree_go_out_as_draft_then_ready(
    tmp_path, serve, monkeypatch, worker_state
) -> None:
    api = serve([ACCEPTED])
    result = run_write(tmp_path, api.url, json.dumps(PART), monkeypatch)
    assert result.exit_code == 0, result.output
    posted = [path for path, _, _ in api.requests if path.endswith("/handoff-packages")]
    assert posted == ["/api/v1/threads/thr-1/handoff-packages"] * 2
    draft, ready = (HandoffPackage.model_validate_json(body) for _, _, body in api.requests if body)
    assert (draft.package_status, ready.package_status) == (PackageStatus.DRAFT, PackageStatus.READY)
    assert ready.critical_files == ["parser.py"]
    assert ready.open_questions == ["q?"]
    assert ready.summary_text.startswith("Half the parser is done.")
    patch = Path(ready.critical_artifacts[-1])
    assert patch.read_text().startswith("diff --git")
    assert patch.is_relative_to(worker_state)  # never in the work tree
    entry = AgentInbox(worker_state / INBOX).read("thr-1")
    assert entry is not None
    assert entry.agent.summary == PART["summary"]


def test_a_part_not_in_the_shape_is_refused_with_the_reason_and_nothing_is_posted(tmp_path, serve, monkeypatch) -> None:
    api = serve([ACCEPTED])
    result = run_write(tmp_path, api.url, '{"summary": "x", "next": []}', monkeypatch)
    assert result.exit_code == 2
    assert "not the handoff shape" in result.output
    assert api.requests == []


def test_an_unreachable_api_keeps_both_versions_for_the_next_run(tmp_path, serve, monkeypatch, worker_state) -> None:
    monkeypatch.setattr("reporter.delivery.http.RetryDelays.delay", lambda self, attempt, retry_after: 0.0)
    api = serve([ACCEPTED])
    api.down = True
    result = run_write(tmp_path, api.url, json.dumps(PART), monkeypatch)
    assert result.exit_code == 1
    assert "2 versions kept" in result.output
    owed = RelayPaths(worker_state / HANDOFF_WRITE).outbox(WRITE_OUTBOX_NAME).owed()
    assert [o.package.package_status for o in owed if o.package] == [PackageStatus.DRAFT, PackageStatus.READY]
    assert AgentInbox(worker_state / INBOX).read("thr-1") is not None  # the relay can still use the part


@pytest.fixture
def budget_api() -> Iterator[FakeBudgetApi]:
    yield from FakeBudgetApi().serve()


def test_without_project_id_the_api_names_the_project_and_the_cycle_is_recorded(
    tmp_path, budget_api: FakeBudgetApi, monkeypatch, worker_state
) -> None:
    """Only CTXBUDGET_API_URL and CTXBUDGET_WORKER_TOKEN in the environment, as in the agent tool's shell."""
    monkeypatch.delenv("CTXBUDGET_PROJECT_ID", raising=False)
    budget_api.thread("thr-1", project_id="proj-from-api", compaction_count=3)
    posted: list[HandoffPackage] = []

    async def send_package(self, package: HandoffPackage) -> None:
        posted.append(package)

    monkeypatch.setattr("reporter.delivery.http.HttpDelivery.send_package", send_package)
    env = {"CTXBUDGET_API_URL": budget_api.url, "CTXBUDGET_WORKER_TOKEN": "t"}
    args = ["handoff", "write", "--thread", "thr-1", "--cwd", str(repo_with_a_change(tmp_path))]
    result = CliRunner().invoke(app, args, input=json.dumps(PART), env=env)
    assert result.exit_code == 0, result.output
    assert {p.project_id for p in posted} == {"proj-from-api"}
    entry = AgentInbox(worker_state / INBOX).read("thr-1")
    assert entry is not None
    assert entry.compaction_count == 3


def test_a_thread_the_api_does_not_know_keeps_the_part_for_the_relay_and_says_so(
    tmp_path, budget_api: FakeBudgetApi, monkeypatch, worker_state
) -> None:
    monkeypatch.delenv("CTXBUDGET_PROJECT_ID", raising=False)
    args = ["handoff", "write", "--thread", "thr-9", "--api-url", budget_api.url, "--cwd", str(tmp_path)]
    result = CliRunner().invoke(app, args, input=json.dumps(PART))
    assert result.exit_code == 1
    assert "does not know thread thr-9" in result.stderr
    assert AgentInbox(worker_state / INBOX).read("thr-9") is not None


def test_a_part_counts_only_in_the_cycle_it_was_written_in() -> None:
    at = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    known = InboxEntry.model_validate({"agent": PART, "written_at": at, "compaction_count": 2})
    assert known.of_cycle(ThreadCycle(2, at - timedelta(hours=1)), since=at + timedelta(hours=1))
    assert not known.of_cycle(ThreadCycle(3, at + timedelta(minutes=5)), since=at)  # compacted since
    unknown = InboxEntry.model_validate({"agent": PART, "written_at": at})
    assert unknown.of_cycle(ThreadCycle(3, at - timedelta(minutes=5)), since=at)
    assert not unknown.of_cycle(ThreadCycle(3, at + timedelta(minutes=5)), since=at)
    assert unknown.of_cycle(None, since=at - timedelta(seconds=1))  # no cycle known: written since the action
    assert not unknown.of_cycle(None, since=at + timedelta(seconds=1))
