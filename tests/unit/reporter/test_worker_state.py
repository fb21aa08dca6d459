"""The worker side's state: one per-user directory, never in the user's repository; spools locked per process; a
tailing reporter stopped by a signal still says what it delivered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from core.settings import Settings, default_worker_state_dir
from ctxbudget.cli import app
from reporter.delivery.spool import SpoolBusy, claim_spool, lock_directory
from reporter.readings import Identity
from reporter.relay.outbox import OUTBOX_NAME, RelayOutbox
from reporter.relay.relay import Relay, ThreadWork
from reporter.relay.write import RelayPaths
from reporter.worker_state import state_dir
from schemas import HandoffPackage, MasterAction, MasterActionCommandKind
from tests.unit.reporter.budget_fake import FakeBudgetApi
from tests.unit.reporter.conftest import OK
from tests.unit.reporter.relay.test_relay import item

ROOT = Path(__file__).parents[3]


def test_the_state_dir_is_per_user_never_relative(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("CTXBUDGET_WORKER_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert Settings().worker_state_dir == tmp_path / "xdg" / "ctxbudget"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/xdg")  # the XDG spec ignores it
    assert default_worker_state_dir() == Path.home() / ".local" / "state" / "ctxbudget"
    monkeypatch.setenv("CTXBUDGET_WORKER_STATE_DIR", "var/state")
    with pytest.raises(ValidationError, match="must be absolute"):
        Settings()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


class Taken:
    def __init__(self) -> None:
        self.packages: list[HandoffPackage] = []

    async def send_package(self, package: HandoffPackage) -> None:
        self.packages.append(package)

    async def send_action_command(self, action_id: str, thread_id: str, command: MasterActionCommandKind) -> None:
        pass


@pytest.mark.parametrize("inside", [False, True], ids=["default", "state-dir-inside-the-repo"])
def test_hook_handoff_write_and_relay_leave_the_work_tree_clean(tmp_path, monkeypatch, inside: bool) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.com"], ["config", "user.name", "t"]):
        _git(repo, *args)
    (repo / "app.py").write_text("x = 1\n")
    _git(repo, "add", "app.py")
    _git(repo, "commit", "-qm", "start")
    (repo / "app.py").write_text("x = 2\n")  # the agent's uncommitted work
    before = _git(repo, "status", "--porcelain")
    if inside:
        monkeypatch.setenv("CTXBUDGET_WORKER_STATE_DIR", str(repo / ".ctxbudget"))
    monkeypatch.chdir(repo)  # the tools run hooks and the agent's commands in its working directory
    monkeypatch.delenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr("reporter.delivery.http.RetryPolicy.attempts", 1)
    api = FakeBudgetApi()
    served = api.serve()
    next(served)
    try:
        api.thread("s-1")
        api.owe("s-1", "act-1")
        hook = {"hook_event_name": "Stop", "session_id": "s-1", "cwd": str(repo), "transcript_path": None}
        stop = CliRunner().invoke(app, ["hook", "--api-url", api.url], input=json.dumps(hook))
        assert json.loads(stop.stdout)["decision"] == "block"
        compacting = hook | {"hook_event_name": "PreCompact", "trigger": "auto"}
        assert CliRunner().invoke(app, ["hook"], input=json.dumps(compacting)).exit_code == 0
        part = {"summary": "Half done.", "open_questions": [], "next_actions": [], "decision_links": []}
        write = ["handoff", "write", "--thread", "s-1", "--api-url", api.url]
        written = CliRunner().invoke(app, write, input=json.dumps(part))
        assert "versions kept" in written.stderr  # the stand-in API takes no package: kept for the next run
    finally:
        next(served, None)
    shared = state_dir()
    taken = Taken()
    outbox = RelayOutbox(shared / "spool" / OUTBOX_NAME, shared / "spool" / "rejected.jsonl")
    identity = Identity(node_id="n", worker_id="w", project_id="proj-001")
    paths = RelayPaths(shared / "spool", shared)
    relay = Relay(identity, taken, outbox, paths.patches, work_of=lambda _: ThreadWork(cwd=repo), inbox=paths.inbox)
    relay.take("s-1", [item(MasterAction.PREPARE_HANDOFF, "act-1")])
    asyncio.run(relay.prepare("s-1"))

    assert _git(repo, "status", "--porcelain") == before == " M app.py\n"
    package = taken.packages[-1]
    assert package.summary_text.startswith("Half done.")
    assert package.critical_files == ["app.py"]
    patch = Path(package.critical_artifacts[-1])
    assert patch.is_relative_to(shared)
    assert "app.py" in patch.read_text()
    assert ".ctxbudget" not in patch.read_text()


def test_a_spool_is_held_by_one_process_and_a_second_reporter_takes_the_next(tmp_path) -> None:
    base = tmp_path / "spool"
    first, lock = claim_spool(base)
    with lock:
        assert first == base
        second, other = claim_spool(base)
        with other:
            assert second == tmp_path / "spool-2"
            with pytest.raises(SpoolBusy):
                lock_directory(second)
    again, lock = claim_spool(base)  # let go: the first one is free again
    lock.close()
    assert again == base


def test_report_refuses_a_spool_dir_another_process_holds(tmp_path) -> None:
    with lock_directory(tmp_path / "spool"):
        args = ["report", "--from", "codex-app-server", "--input", str(tmp_path / "none.jsonl")]
        args += ["--node-id", "n", "--worker-id", "w", "--project-id", "p", "--api-url", "http://127.0.0.1:9"]
        result = CliRunner().invoke(app, [*args, "--spool-dir", str(tmp_path / "spool")])
    assert result.exit_code == 2
    assert "another ctxbudget process uses the spool" in result.output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_tailing_reporter_stopped_by_a_signal_prints_its_summary(tmp_path, serve, signum) -> None:
    api = serve([OK])
    sessions = tmp_path / "claude"
    sessions.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CTXBUDGET_WORKER_STATE_DIR": str(tmp_path / "state")}
    args = [sys.executable, "-m", "ctxbudget", "report", "--from", "claude-code", "--dir", str(sessions)]
    args += ["--node-id", "n", "--worker-id", "w", "--project-id", "p", "--api-url", api.url, "--no-relay"]
    process = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "state" / "spool" / "spool.log").exists():  # started: its spool is open
            assert time.monotonic() < deadline, "the reporter did not start"
            time.sleep(0.1)
        time.sleep(0.5)
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert "stopping" in err
    assert "spooled 0 snapshots, delivered 0, rejected 0, left 0" in err
    assert process.returncode == 0
