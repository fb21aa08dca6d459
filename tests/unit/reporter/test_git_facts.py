"""Spec 4.2 facts from a real git repository in a temp dir and the commands a transcript ran."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reporter.git_facts import FactPatterns, GitView, WorkFactTracker, git_view
from schemas import WorkFact

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _git(repo: Path, *args: str, at: datetime = T0) -> None:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": at.isoformat(),
        "GIT_COMMITTER_DATE": at.isoformat(),
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "app.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    return repo


def _active(tracker: WorkFactTracker, thread: str) -> dict[WorkFact, tuple[str, tuple[str, ...]]]:
    return {f: (d, files) for f, (a, d, files) in (tracker.current(thread) or {}).items() if a}


def test_edit_test_and_commit(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    tracker = WorkFactTracker()
    tracker.observe_cwd("t1", str(repo))
    assert tracker.evaluate("t1", T0) == []
    assert not tracker.must_finish("t1")

    (repo / "app.py").write_text("x = 2\n")
    events = tracker.evaluate("t1", T0 + timedelta(minutes=1))
    assert [(e.fact, e.active, e.files) for e in events] == [(WorkFact.UNCOMMITTED_PATCH, True, ["app.py"])]
    assert tracker.must_finish("t1")

    tracker.observe_command("t1", "call-1", ".venv/bin/python -m pytest tests -q", T0 + timedelta(minutes=2))
    tracker.observe_result("t1", "call-1", failed=False)
    events = tracker.evaluate("t1", T0 + timedelta(minutes=3))
    assert [(e.fact, e.active, e.detail) for e in events] == [
        (WorkFact.UNRECORDED_TEST_RESULTS, True, ".venv/bin/python -m pytest tests -q: passed")
    ]
    checklist = tracker.checklist("t1")
    assert checklist.files == ("app.py",)
    assert checklist.last_key_command == ".venv/bin/python -m pytest tests -q"
    assert checklist.last_test_conclusion == ".venv/bin/python -m pytest tests -q: passed"

    _git(repo, "commit", "-qam", "x is 2", at=T0 + timedelta(minutes=4))
    events = tracker.evaluate("t1", T0 + timedelta(minutes=5))
    assert {(e.fact, e.active) for e in events} == {
        (WorkFact.UNCOMMITTED_PATCH, False),
        (WorkFact.UNRECORDED_TEST_RESULTS, False),
    }
    assert not tracker.must_finish("t1")


def test_decisions_hardware_and_other_test_runners(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "docs" / "adr").mkdir(parents=True)
    (repo / "docs" / "adr" / "0001-use-kafka.md").write_text("# Use Kafka\n")
    tracker = WorkFactTracker(FactPatterns(waiting=(r"\bwait-for-node\b",)))
    tracker.observe_cwd("t1", str(repo))
    tracker.observe_command("t1", "c1", "esptool.py --port /dev/ttyUSB0 write_flash 0x0 fw.bin", T0)
    tracker.observe_command("t1", "c2", "wait-for-node b-7", T0)
    active = _active(tracker, "t1")
    assert active[WorkFact.UNRECORDED_DECISIONS] == ("", ("docs/adr/0001-use-kafka.md",))
    assert WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP in active
    assert active[WorkFact.AWAITING_CROSS_NODE_REPLY] == ("wait-for-node b-7", ())
    tracker.observe_result("t1", "c1", failed=False)
    assert WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP not in _active(tracker, "t1")
    patterns = FactPatterns()
    for command in ("pnpm test", "yarn run test", "cargo test -p x", "go test ./...", "./gradlew check", "ctest -j4"):
        assert patterns.matches(patterns.test, command), command
    assert not patterns.matches(patterns.test, "git commit -m 'fix tests'")


def test_a_directory_that_is_no_repository_has_no_facts(tmp_path: Path) -> None:
    tracker = WorkFactTracker()
    tracker.observe_cwd("t1", str(tmp_path))
    assert git_view(tmp_path) is None
    assert tracker.evaluate("t1", T0) == []


def _record(kind: str, uuid: str, at: datetime, cwd: Path, content: list, **extra: object) -> str:
    import json

    message: dict = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": f"m-{uuid}", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 50_000}}
    record = {"type": kind, "uuid": uuid, "sessionId": "s1", "cwd": str(cwd), "timestamp": at.isoformat()}
    return json.dumps(record | {"message": message, "requestId": f"r-{uuid}"} | extra) + "\n"


async def test_a_claude_thread_reports_must_finish_from_its_repository(tmp_path: Path) -> None:
    import asyncio
    import contextlib

    from reporter.claude_code.transcripts import TranscriptTailer
    from reporter.reporter import run_rollouts
    from tests.unit.reporter.test_reporter import IDENTITY, Reporter, _Clock, _Delivery

    repo = _repo(tmp_path)
    (repo / "app.py").write_text("x = 3\n")
    transcript = tmp_path / "projects" / "p" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    call = [{"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "pytest -q"}}]
    result = [{"type": "tool_result", "tool_use_id": "tu1", "content": "1 passed", "is_error": False}]
    transcript.write_text(
        _record("assistant", "a1", T0 + timedelta(minutes=1), repo, call)
        + _record("user", "u1", T0 + timedelta(minutes=1), repo, result)
    )
    clock, delivery = _Clock(), _Delivery()
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    tailer = TranscriptTailer(
        tmp_path / "projects", tmp_path / "state.json", collect_events=True, facts=WorkFactTracker()
    )

    async def run_a_while() -> None:
        task = asyncio.create_task(run_rollouts(reporter, tailer, poll_seconds=0.05))
        await asyncio.sleep(0.4)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    await run_a_while()
    facts = {(e.fact, e.active) for e in delivery.events if e.type == "work_fact_changed"}
    assert facts == {(WorkFact.UNCOMMITTED_PATCH, True), (WorkFact.UNRECORDED_TEST_RESULTS, True)}
    assert delivery.snapshots[-1].must_finish_before_compaction is True

    _git(repo, "commit", "-qam", "x is 3", at=T0 + timedelta(minutes=2))  # the agent's own commit, below
    commit = [{"type": "tool_use", "id": "tu2", "name": "Bash", "input": {"command": "git commit -qam 'x is 3'"}}]
    committed = [{"type": "tool_result", "tool_use_id": "tu2", "content": "", "is_error": False}]
    with transcript.open("a") as handle:
        handle.write(_record("assistant", "a2", T0 + timedelta(minutes=3), repo, commit))
        handle.write(_record("user", "u2", T0 + timedelta(minutes=3), repo, committed))
    clock.now += timedelta(seconds=5)
    await run_a_while()
    cleared = [(e.fact, e.active) for e in delivery.events if e.type == "work_fact_changed"][2:]
    assert set(cleared) == {(WorkFact.UNCOMMITTED_PATCH, False), (WorkFact.UNRECORDED_TEST_RESULTS, False)}
    assert delivery.snapshots[-1].must_finish_before_compaction is False


def test_git_is_asked_after_a_command_or_an_edit_once_the_tree_settled_else_every_refresh(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    tracker = WorkFactTracker(refresh=timedelta(seconds=5))
    tracker.observe_cwd("t1", str(repo))
    assert tracker.due("t1", T0)
    tracker.evaluate("t1", T0)
    assert not tracker.due("t1", T0 + timedelta(seconds=4))  # a line without a command: not yet
    assert tracker.due("t1", T0 + timedelta(seconds=5))
    tracker.observe_command("t1", "c1", "pytest", T0 + timedelta(seconds=1))
    assert tracker.due("t1", T0 + timedelta(seconds=1))  # a command started: at once
    tracker.evaluate("t1", T0 + timedelta(seconds=1))
    tracker.observe_result("t1", "c1", failed=True)
    assert tracker.due("t1", T0 + timedelta(seconds=2))  # and finished: at once, the tree's look being 2 s old
    tracker.evaluate("t1", T0 + timedelta(seconds=2))
    tracker.observe_edit("t1")
    assert not tracker.due("t1", T0 + timedelta(seconds=3))  # an edit tool ran 1 s after the look: the tree settles
    assert tracker.due("t1", T0 + timedelta(seconds=4))


def test_a_work_tree_look_is_shared_until_a_command_finishes_or_an_edit(tmp_path: Path, monkeypatch) -> None:
    import reporter.git_facts as git_facts

    repo = _repo(tmp_path)
    looks: list[Path] = []
    real = git_facts.git_view
    monkeypatch.setattr(git_facts, "git_view", lambda cwd, previous=None: looks.append(cwd) or real(cwd, previous))
    tracker = WorkFactTracker(refresh=timedelta(seconds=60))
    for thread in ("t1", "t2", "t3"):
        tracker.observe_cwd(thread, str(repo))
    (repo / "app.py").write_text("x = 9\n")
    changed = [tracker.evaluate(t, T0) for t in ("t1", "t2", "t3")]
    assert len(looks) == 1
    assert all([e.fact for e in events] == [WorkFact.UNCOMMITTED_PATCH] for events in changed)
    tracker.observe_cwd("t4", str(repo))  # a thread seen later, in the same tree: its first look is the tree's
    assert [e.fact for e in tracker.evaluate("t4", T0 + timedelta(seconds=1))] == [WorkFact.UNCOMMITTED_PATCH]
    tracker.observe_command("t1", "c", "pytest", T0 + timedelta(seconds=2))
    started = tracker.evaluate("t1", T0 + timedelta(seconds=2))  # a start cannot have changed the tree yet
    assert len(looks) == 1
    assert [(e.fact, e.detail) for e in started] == [(WorkFact.UNRECORDED_TEST_RESULTS, "pytest: running")]
    (repo / "new.py").write_text("y = 1\n")
    tracker.observe_result("t1", "c", failed=False)
    finished = tracker.evaluate("t2", T0 + timedelta(seconds=3))  # any thread of the tree looks again
    assert len(looks) == 2
    assert [(e.fact, e.files) for e in finished] == [(WorkFact.UNCOMMITTED_PATCH, ["app.py", "new.py"])]
    tracker.observe_edit("t3")
    tracker.evaluate("t3", T0 + timedelta(seconds=4))  # the look is 1 s old: the tree settles first
    assert len(looks) == 2
    tracker.evaluate("t3", T0 + timedelta(seconds=5))
    assert len(looks) == 3
    tracker.evaluate("t3", T0 + timedelta(seconds=65))  # older than refresh: a change outside the agent shows
    assert len(looks) == 4


def test_a_busy_tree_is_looked_at_once_per_settle_and_its_change_shows_within_it(tmp_path: Path, monkeypatch) -> None:
    import reporter.git_facts as git_facts

    repo = _repo(tmp_path)
    looks: list[datetime] = []
    real = git_facts.git_view
    monkeypatch.setattr(git_facts, "git_view", lambda cwd, previous=None: looks.append(now) or real(cwd, previous))
    tracker = WorkFactTracker(settle=timedelta(seconds=2))
    now = T0
    for thread in ("t1", "t2"):
        tracker.observe_cwd(thread, str(repo))
        tracker.evaluate(thread, now)
    (repo / "new.py").write_text("y = 1\n")
    seen = []
    for step in range(1, 9):  # every 0.5 s one of the two threads runs a command that changes the tree
        now = T0 + timedelta(seconds=step / 2)
        thread = ("t1", "t2")[step % 2]
        tracker.observe_command(thread, f"c{step}", "make", now)
        tracker.observe_result(thread, f"c{step}", failed=False)
        for each in ("t1", "t2"):
            if tracker.due(each, now):
                seen += [(now - T0, each, e.fact) for e in tracker.evaluate(each, now)]
    assert [at - T0 for at in looks] == [timedelta(0), timedelta(seconds=2), timedelta(seconds=4)]
    settled = timedelta(seconds=2)
    assert seen == [(settled, "t1", WorkFact.UNCOMMITTED_PATCH), (settled, "t2", WorkFact.UNCOMMITTED_PATCH)]


def test_git_runs_once_a_look_while_head_names_the_same_commit(tmp_path: Path, monkeypatch) -> None:
    import reporter.git_facts as git_facts

    repo = _repo(tmp_path)
    calls: list[str] = []
    real = git_facts._git
    monkeypatch.setattr(git_facts, "_git", lambda cwd, *args: calls.append(args[0]) or real(cwd, *args))
    first = git_view(repo)
    assert first is not None
    assert first.last_commit_at == T0
    assert calls == ["status", "log"]
    again = git_view(repo, first)
    assert again == first
    assert calls == ["status", "log", "status"]
    _git(repo, "commit", "-q", "--allow-empty", "-m", "later", at=T0 + timedelta(hours=1))
    moved = git_view(repo, again)
    assert moved is not None
    assert moved.last_commit_at == T0 + timedelta(hours=1)
    assert moved.head != first.head
    assert calls[-2:] == ["status", "log"]


def test_changed_files_of_every_kind_of_entry(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "notes.md").write_text("n\n")
    _git(repo, "add", "notes.md")
    _git(repo, "commit", "-qm", "notes")
    _git(repo, "mv", "notes.md", "renamed notes.md")  # a rename, with a space in the new name
    (repo / "app.py").write_text("x = 3\n")  # modified, not staged
    (repo / "d").mkdir()
    (repo / "d" / "ünïcode.txt").write_text("u\n")  # untracked, in a new directory
    view = git_view(repo)
    assert view is not None
    assert view.changed_files == ("app.py", "d/ünïcode.txt", "renamed notes.md")


def test_a_repository_without_a_commit_has_no_last_commit(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("a\n")
    assert git_view(repo) == GitView(("a.py",), None)
