"""A worker set up exactly as the README tells a user, around real Claude Code and Codex sessions, against a running
pipeline; and what the pipeline recorded of their compactions, read back through the API's SQL endpoint.

One `Group` is one worker (its own HOME, git work tree, worker token and project) in one mode, with the relay on
(the README's set-up: `ctxbudget hooks install`, `ctxbudget report`) or off (the reporter with `--no-relay` and no
hooks: the baseline). Its sessions run one after another, each until it compacted and took one more turn. The model
is scripted (tests/realtools/model_server.py); the tools, the hooks, the reporter and the pipeline are real.

Used by tests/integration/test_real_relay.py (one session per mode) and bench/relay_real.py (many, relay on and off).
No pytest here.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from reporter.relay.assembly import FACTS_ONLY_MARK
from tests.realtools.model_server import Api, Kind, ModelServer, Script
from tests.realtools.sessions import ClaudeSession, CodexSession, Session
from tests.realtools.tools import Tools

CTXBUDGET = Path(sys.executable).with_name("ctxbudget")
"""The README's `.venv/bin/ctxbudget`."""
MAX_TURNS = 8
REPORTER_STOP_SECONDS = 30


class Mode(StrEnum):
    CLAUDE_AUTO = "claude-auto"
    CLAUDE_MANUAL = "claude-manual"
    CODEX_EXEC = "codex-exec"
    CODEX_APP_SERVER = "codex-app-server"


# Usage per step climbs so a session passes watch, urgent and critical in a few turns before the tool's own point:
# Claude Code compacts at about 177,000 (input + output of the last reply), Codex at 0.9 x 272,000 = 244,800 (every
# step stays under the 258,400 Codex reports as usable).
CLAUDE_SCRIPT = Script(base_tokens=20_000, tokens_per_step=12_000, steps_per_turn=4)
CODEX_SCRIPT = Script(base_tokens=20_000, tokens_per_step=15_000, steps_per_turn=5)
APP_SERVER_SCRIPT = Script(base_tokens=20_000, tokens_per_step=15_000, steps_per_turn=22)
"""One long turn (the reporter starts the thread with one first input): Codex compacts in its middle."""
MANUAL_COMPACT_AT = 120_000
"""The user runs `/compact` at the end of the first turn past this: 128,000 after two turns of the script, where the
next would reach Claude Code's own point (about 176,000) within the turn."""
PROMPT = "Work through the script."


@dataclass
class SessionRecord:
    mode: Mode
    thread_id: str
    compactions: int
    resumed: bool
    """A request after the compaction carried the package's resume prompt."""
    work_tree_status: list[str]
    """`git status --porcelain` of the work tree at the end: the agent's own files only."""
    seconds: float


@dataclass
class Group:
    mode: Mode
    relay: bool
    root: Path
    api: str
    token: str
    project: str
    worker: str
    binaries: Tools
    step_seconds: float = 1.0
    sessions: list[SessionRecord] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    def script(self) -> Script:
        base = {
            Mode.CLAUDE_AUTO: CLAUDE_SCRIPT,
            Mode.CLAUDE_MANUAL: CLAUDE_SCRIPT,
            Mode.CODEX_EXEC: CODEX_SCRIPT,
            Mode.CODEX_APP_SERVER: APP_SERVER_SCRIPT,
        }[self.mode]
        return Script(**{**vars(base), "step_seconds": self.step_seconds})

    def user_env(self) -> dict[str, str]:
        """The environment the README has the user set for the tools and the reporter: the API and the worker's
        token. PATH is the machine's, without the venv's bin: the tools find ctxbudget by the path the hooks name."""
        venv_bin = str(CTXBUDGET.parent)
        path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
        env = {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "CTXBUDGET_API_URL": self.api,
            "CTXBUDGET_WORKER_TOKEN": self.token,
        }
        if self.mode in (Mode.CODEX_EXEC, Mode.CODEX_APP_SERVER):
            env["CODEX_HOME"] = str(self.home / ".codex")
        return env

    def ctxbudget(self, *args: str) -> str:
        done = subprocess.run(
            [str(CTXBUDGET), *args], env=self.user_env(), capture_output=True, text=True, timeout=60, cwd=self.root
        )
        if done.returncode != 0:
            raise AssertionError(f"ctxbudget {shlex.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def reporter_args(self) -> list[str]:
        source = {
            Mode.CLAUDE_AUTO: "claude-code",
            Mode.CLAUDE_MANUAL: "claude-code",
            Mode.CODEX_EXEC: "codex-rollouts",
            Mode.CODEX_APP_SERVER: "codex-app-server",
        }[self.mode]
        args = ["report", "--from", source, "--node-id", f"node-{self.worker}", "--worker-id", self.worker]
        args += ["--project-id", self.project]
        return args if self.relay else [*args, "--no-relay"]

    def start_reporter(
        self, *extra: str, log_name: str = "reporter.log", tool_env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """`ctxbudget report` in the user's environment (and the tool's own, for an app-server it starts)."""
        log = (self.root / log_name).open("ab")
        return subprocess.Popen(
            [str(CTXBUDGET), *self.reporter_args(), *extra],
            env={**self.user_env(), **(tool_env or {})},
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def run(self, sessions: int) -> list[SessionRecord]:
        """The README's set-up, then `sessions` sessions one after another."""
        self.root.mkdir(parents=True, exist_ok=True)
        claude = self.api_kind() is _ApiKind.CLAUDE
        server = ModelServer(claude=self.script()) if claude else ModelServer(codex=self.script())
        with server:
            if self.mode is Mode.CODEX_APP_SERVER:
                for index in range(sessions):
                    self.sessions.append(self.app_server_session(server, index))
                return self.sessions
            first = self.new_session(server)
            first.prepare()
            if self.relay:
                self.install_hooks()
            reporter = self.start_reporter()
            try:
                for index in range(sessions):
                    session = first if index == 0 else self.new_session(server)
                    self.sessions.append(self.play(session, server))
            finally:
                stop(reporter)
        return self.sessions

    def api_kind(self) -> _ApiKind:
        return _ApiKind.CLAUDE if self.mode in (Mode.CLAUDE_AUTO, Mode.CLAUDE_MANUAL) else _ApiKind.CODEX

    def new_session(self, server: ModelServer) -> ClaudeSession | CodexSession:
        binary = self.binaries.claude if self.api_kind() is _ApiKind.CLAUDE else self.binaries.codex
        env = {k: v for k, v in self.user_env().items() if k not in ("HOME", "CODEX_HOME")}
        if self.api_kind() is _ApiKind.CLAUDE:
            return ClaudeSession(binary, server, self.root, env=env, timeout=300)
        return CodexSession(binary, server, self.root, env=env, trust_hooks=False, timeout=300)

    def install_hooks(self) -> None:
        if self.api_kind() is _ApiKind.CLAUDE:
            self.ctxbudget("hooks", "install", "--tool", "claude")
        else:
            self.ctxbudget("hooks", "install", "--tool", "codex", "--trust")

    def play(self, session: ClaudeSession | CodexSession, server: ModelServer) -> SessionRecord:
        """Turns until the session compacted, then one more (the resumed work)."""
        started = time.monotonic()
        for _ in range(MAX_TURNS):
            session.turn(PROMPT).check()
            if session.compactions():
                break
            if self.mode is Mode.CLAUDE_MANUAL and last_context(server, session_key(session)) >= MANUAL_COMPACT_AT:
                assert isinstance(session, ClaudeSession)
                session.compact().check()
                break
        else:
            raise AssertionError(f"{self.mode}: no compaction in {MAX_TURNS} turns")
        session.turn(PROMPT).check()
        return self.record(session_key(session), len(session.compactions()), server, session, started)

    def app_server_session(self, server: ModelServer, index: int) -> SessionRecord:
        """The reporter as Codex's app-server client (README): it starts the thread with the first input and reports
        until the app-server ends; here, once the thread's long turn ended."""
        session = CodexSession(self.binaries.codex, server, self.root, trust_hooks=False)
        session.prepare()
        first_input = self.root / "first-input.txt"
        first_input.write_text(PROMPT)
        started = time.monotonic()
        seen = {exchange.session for exchange in server.exchanges}
        reporter = self.start_reporter(
            "--app-server",
            f"{self.binaries.codex} app-server",
            "--first-input",
            str(first_input),
            "--cwd",
            str(session.work),
            log_name=f"reporter-{index}.log",
            tool_env=session.tool_env(),
        )
        try:
            thread = wait_for(lambda: next((e.session for e in server.exchanges if e.session not in seen), None), 60)
            wait_for(lambda: bool(server.of(Api.OPENAI, Kind.END_TURN, thread)), 300)
        finally:
            stop(reporter)
        compactions = len(server.of(Api.OPENAI, Kind.COMPACTION, thread))
        return self.record(thread, compactions, server, session, started)

    def record(
        self, thread: str, compactions: int, server: ModelServer, session: Session, started: float
    ) -> SessionRecord:
        exchanges = [e for e in server.exchanges if e.session == thread]
        last_compaction = max((i for i, e in enumerate(exchanges) if e.kind is Kind.COMPACTION), default=None)
        resumed = last_compaction is not None and any(e.resumed for e in exchanges[last_compaction + 1 :])
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=session.work,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        return SessionRecord(self.mode, thread, compactions, resumed, status, time.monotonic() - started)


class _ApiKind(StrEnum):
    CLAUDE = "claude"
    CODEX = "codex"


def session_key(session: ClaudeSession | CodexSession) -> str:
    """The thread id the tool sends the model and the pipeline reports: Claude Code's session id, Codex's thread."""
    if isinstance(session, ClaudeSession):
        return session.session_id
    assert session.thread_id is not None
    return session.thread_id


def last_context(server: ModelServer, thread: str) -> int:
    turns = [e for e in server.exchanges if e.session == thread and e.kind is not Kind.SIDE]
    return turns[-1].total_tokens if turns else 0


def wait_for(found: Any, within: float) -> Any:
    deadline = time.monotonic() + within
    while not (value := found()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s")
        time.sleep(0.2)
    return value


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops the reporter (it flushes what it owes and prints its summary)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(REPORTER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def worker_token(data_dir: Path, worker: str, project: str) -> str:
    """What `ctxbudget token --role worker --subject W --project P` prints (README), for the pipeline of `data_dir`."""
    done = subprocess.run(
        [str(CTXBUDGET), "token", "--role", "worker", "--subject", worker, "--project", project],
        env={"PATH": "/usr/bin:/bin", "CTXBUDGET_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


# --- what the pipeline recorded ---------------------------------------------------------------------------------------


def sql(api: str, token: str, query: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{api}/api/v1/sql?format=json",
        data=query.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        raise AssertionError(f"SQL answered {error.code}: {error.read()[:500]!r}") from error
    return [json.loads(line) for line in body.splitlines() if line.strip()]


@dataclass
class Compaction:
    thread_id: str
    trigger_mode: str
    at: str
    handoff_ready: bool
    package_id: str | None
    """The thread's package that was ready when the compaction began (None: none was)."""
    agent_part: bool
    """That package holds the agent's own summary."""


@dataclass
class Recorded:
    """What the pipeline recorded for one project (one group)."""

    compactions: list[Compaction]
    packages: list[dict[str, Any]]
    facts_only: int
    handoff_missing: int
    waits: list[float]
    """prepare_handoff issued -> ready, seconds, for each action a ready package completed."""
    issued: int
    ctxbudget_paths: list[str]
    """Files a package names as the work's that are ctxbudget's own (its state, ./var): must be none. (A saved patch
    is linked among the artifacts from the worker's state dir: that link is the package's, not a work file.)"""

    @property
    def ready_share(self) -> float:
        return sum(c.handoff_ready for c in self.compactions) / len(self.compactions) if self.compactions else 0.0

    @property
    def agent_share(self) -> float:
        return sum(c.agent_part for c in self.compactions) / len(self.compactions) if self.compactions else 0.0


def recorded(api: str, token: str, project: str, agent_summary: str) -> Recorded:
    """Every compaction of the project with the package ready when it began, read from ClickHouse."""
    quoted = "'" + project.replace("\\", "\\\\").replace("'", "\\'") + "'"
    compactions = sql(
        api,
        token,
        "SELECT thread_id, trigger_mode, toString(coalesce(started_at, completed_at)) AS at, handoff_ready"
        f" FROM compaction_events WHERE project_id = {quoted} ORDER BY at LIMIT 1 BY event_id",
    )
    packages = sql(
        api,
        token,
        "SELECT handoff_package_id, from_thread_id, package_status, summary_text, critical_files,"
        " critical_artifacts, toString(ready_at) AS ready_at"
        f" FROM thread_handoff_packages FINAL WHERE project_id = {quoted}",
    )
    missing = sql(
        api,
        token,
        "SELECT count() AS n FROM (SELECT alert_id FROM thread_context_alerts FINAL"
        f" WHERE project_id = {quoted} AND alert_type = 'handoff_missing')",
    )
    actions = sql(
        api,
        token,
        "SELECT action_id, toString(min(issued_at)) AS issued,"
        " toString(minIf(state_changed_at, state = 'done' AND state_reason = 'handoff_ready')) AS ready,"
        " countIf(state = 'done' AND state_reason = 'handoff_ready') AS readied"
        f" FROM master_actions WHERE project_id = {quoted} AND has(actions, 'prepare_handoff') GROUP BY action_id",
    )
    found = []
    for row in compactions:
        before = [
            p
            for p in packages
            if p["from_thread_id"] == row["thread_id"] and p["ready_at"] and p["ready_at"] <= row["at"]
        ]
        package = max(before, key=lambda p: p["ready_at"], default=None)
        found.append(
            Compaction(
                row["thread_id"],
                row["trigger_mode"],
                row["at"],
                bool(row["handoff_ready"]),
                package["handoff_package_id"] if package else None,
                package is not None and agent_summary in package["summary_text"],
            )
        )
    own = [
        path
        for p in packages
        for path in p["critical_files"]
        if "ctxbudget" in path.split("/") or path.startswith(("var/", "./var/"))
    ]
    waits = [seconds(row["issued"], row["ready"]) for row in actions if int(row["readied"])]
    return Recorded(
        found,
        packages,
        sum(p["summary_text"].startswith(FACTS_ONLY_MARK) for p in packages),
        int(missing[0]["n"]) if missing else 0,
        waits,
        len(actions),
        own,
    )


def settled(api: str, token: str, groups: list[Group], summary: str, within: float) -> dict[str, Recorded]:
    """Each group's record (by project) once ClickHouse holds every compaction its sessions made, or `within` seconds
    are over: the sinks write a moment after the folds."""
    deadline = time.monotonic() + within
    while True:
        results = {g.project: recorded(api, token, g.project, summary) for g in groups}
        behind = [g for g in groups if len(results[g.project].compactions) < sum(s.compactions for s in g.sessions)]
        if not behind or time.monotonic() > deadline:
            return results
        time.sleep(1)


def seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
