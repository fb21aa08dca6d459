"""The 8.3 package from a real git work tree and the agent's part; the agent's JSON shape."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.handoff import FACTS_ONLY_MARK, assess
from reporter.agent_handoff import AgentHandoff, output_schema, parse
from reporter.git_facts import Checklist
from reporter.relay.assembly import assemble, gather, promote
from schemas import PackageStatus

NOW = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
AGENT = AgentHandoff(
    summary="Parser done; integration next.",
    open_questions=["keep heartbeats?"],
    next_actions=["run the integration suite"],
    decision_links=["docs/adr/0001.md"],
)


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=environment)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "a.py").write_text("a = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "before the thread", env={"GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"})
    return repo


def _package(facts, agent=None, messages=()):
    return assemble(
        package_id="hp-1",
        project_id="proj-1",
        task_id=None,
        thread_id="thr-1",
        facts=facts,
        agent=agent,
        latest_messages=messages,
        now=NOW,
    )


def test_the_package_carries_files_commits_and_a_patch_the_next_thread_can_apply(repo: Path, tmp_path: Path) -> None:
    began = datetime.now(UTC) - timedelta(seconds=5)
    (repo / "b.py").write_text("b = 2\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-q", "-m", "add b")
    (repo / "a.py").write_text("a = 10\n")
    (repo / "new.txt").write_text("fresh\n")
    checklist = Checklist(last_key_command="pytest -q", last_test_conclusion="pytest -q: passed")
    facts = gather(repo, began, tmp_path / "patches", "thr-1", checklist, ["logs/run.txt"])

    assert facts.files == ("a.py", "new.txt")
    assert [line.split(" ", 1)[1] for line in facts.commits] == ["add b"]
    assert facts.pending_patch is not None
    assert facts.pending_patch.parent == tmp_path / "patches"
    assert git(repo, "status", "--porcelain") == " M a.py\n?? new.txt\n"  # the user's index is untouched
    assert git(repo, "fsck", "--unreachable", "--no-reflogs") == ""  # nor its object store
    assert list((tmp_path / "patches").iterdir()) == [facts.pending_patch]  # no scratch left beside the patch

    package = _package(facts, AGENT)
    assert package.package_status is PackageStatus.DRAFT
    assert package.critical_files == ["a.py", "new.txt"]
    assert package.critical_commands == ["pytest -q"]
    assert package.critical_tests == ["pytest -q: passed"]
    assert package.critical_artifacts[-2:] == [str(facts.pending_patch), "logs/run.txt"]
    assert package.critical_artifacts[0].startswith("completed patch: commit ")
    assert (package.open_questions, package.decision_links) == (["keep heartbeats?"], ["docs/adr/0001.md"])
    assert "Parser done" in package.summary_text
    assert "- run the integration suite" in package.summary_text

    # the next thread applies the saved patch on a clean checkout of the same commit and gets the same tree
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "apply", str(facts.pending_patch))
    assert (clone / "a.py").read_text() == "a = 10\n"
    assert (clone / "new.txt").read_text() == "fresh\n"


def test_a_clean_tree_saves_no_patch_and_an_old_thread_start_lists_no_earlier_commit(repo: Path, tmp_path) -> None:
    facts = gather(repo, datetime.now(UTC) + timedelta(hours=1), tmp_path / "p", "thr-1")
    assert (facts.files, facts.commits, facts.pending_patch) == ((), (), None)
    assert not (tmp_path / "p").exists() or list((tmp_path / "p").iterdir()) == []


def test_ready_only_once_the_engines_rule_is_met() -> None:
    facts = gather(None, None, Path("/nonexistent"), "thr-1")
    empty = _package(facts)
    assert empty.summary_text == ""
    assert promote(empty, NOW) is None  # nothing known: it stays a draft
    ready = promote(_package(facts, AGENT), NOW + timedelta(seconds=1))
    assert ready is not None
    assert ready.package_status is PackageStatus.READY
    assert ready.ready_at == NOW + timedelta(seconds=1)
    assert assess(ready).status is PackageStatus.READY  # the engine keeps it as claimed


def test_without_the_agent_the_summary_quotes_its_latest_messages_and_says_so() -> None:
    facts = gather(None, None, Path("/nonexistent"), "thr-1", Checklist(files=("x.py",)))
    package = _package(facts, None, ["Refactored the tailer.", "  ", "Tests are green."])
    assert package.summary_text.startswith(FACTS_ONLY_MARK)
    assert "Refactored the tailer.\n\nTests are green." in package.summary_text
    assert "Uncommitted changes in: x.py" in package.summary_text
    assert package.open_questions == []
    assert package.decision_links == []
    assert promote(package, NOW) is not None


def test_the_output_schema_is_strict_and_describes_the_same_shape() -> None:
    schema = output_schema()
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == sorted(AgentHandoff.model_fields)
    assert all("default" not in field for field in schema["properties"].values())
    assert schema["properties"]["next_actions"]["type"] == "array"


def test_an_answer_is_read_whole_or_as_its_last_json_object() -> None:
    body = AGENT.model_dump()
    assert parse(json.dumps(body)) == AGENT
    assert parse(f"Sure, here it is:\n```json\n{json.dumps(body)}\n```") == AGENT
    assert parse('{"summary": ""}') is None  # an empty summary is no handoff
    assert parse('{"summary": "x", "extra": 1}') is None
    assert parse("no json at all") is None
