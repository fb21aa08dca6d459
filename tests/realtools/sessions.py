"""Sessions of the real Claude Code and Codex CLI against the scripted model (tests/realtools/model_server.py).

Each session lives in a folder of its own: a HOME (Claude Code's `~/.claude`, Codex's `CODEX_HOME` under it) and a
work tree that is a git repository, so nothing of the user's or of another session is read or written. The
environment and flags are the ones measured in docs/real-tools.md; `env` adds the pipeline's (CTXBUDGET_API_URL...),
`hooks` writes the tools' hook config (Claude Code's settings.json, Codex's hooks.json, trusted as the TUI's "Trust
all" does). No pytest here: `bench/` drives sessions too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reporter.codex.trust import trust
from tests.realtools.model_server import ModelServer

CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"
"""In 0.169.0's model catalog: window 272,000 (258,400 reported as usable); compacts at 0.9 x 272,000."""
CLAUDE_AUTO_COMPACT_WINDOW = "200000"
"""Against a base URL that is not Anthropic's, Claude Code compacts proactively only with this set (then at about
177,000 tokens counting the last reply's output)."""
DEFAULT_TIMEOUT = 60.0

Hooks = dict[str, list[dict[str, Any]]]
"""Both tools' hooks shape: event -> [{"matcher": ..., "hooks": [{"type": "command", "command": ..., ...}]}]."""


@dataclass(frozen=True)
class Run:
    """One invocation of a tool."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> Run:
        if self.returncode != 0:
            raise AssertionError(
                f"{self.argv[0]} exited {self.returncode} after {self.seconds:.1f} s\n"
                f"stdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-2000:]}"
            )
        return self


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Session:
    """What both tools' sessions share: the folders, the environment, running the binary with a timeout."""

    binary: Path
    server: ModelServer
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    """Added to the tool's environment (e.g. the pipeline's CTXBUDGET_API_URL, a PATH with ctxbudget on it)."""
    timeout: float = DEFAULT_TIMEOUT

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if not (self.work / ".git").exists():
            self.work.mkdir(parents=True, exist_ok=True)
            git = ["git", "-c", "user.name=ctxbudget", "-c", "user.email=tests@ctxbudget.invalid"]
            (self.work / "README.md").write_text("A work tree for a real agent session.\n")
            for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
                subprocess.run([*git, *args], cwd=self.work, check=True, capture_output=True)

    def base_env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8"}

    def tool_env(self) -> dict[str, str]:
        raise NotImplementedError

    def invoke(self, args: list[str], timeout: float | None = None) -> Run:
        self.prepare()
        argv = [str(self.binary), *args]
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=self.work,
                env={**self.base_env(), **self.tool_env(), **self.env},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout,
            )
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(
                f"{self.binary.name} did not finish within {timeout or self.timeout} s: {argv}\n"
                f"stderr: {(expired.stderr or b'')[-2000:]!r}"
            ) from expired
        return Run(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


@dataclass
class ClaudeSession(Session):
    """`claude -p` turns of one session: the first with `--session-id`, the next with `--resume`."""

    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    auto_compact: bool = True
    hooks: Hooks | None = None
    turns: int = 0

    def prepare(self) -> None:
        super().prepare()
        if self.hooks is not None:
            settings = self.home / ".claude" / "settings.json"
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps({"hooks": self.hooks}, indent=2))

    def tool_env(self) -> dict[str, str]:
        env = {
            "ANTHROPIC_BASE_URL": self.server.anthropic_url,
            "ANTHROPIC_API_KEY": "scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        if self.auto_compact:
            env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = CLAUDE_AUTO_COMPACT_WINDOW
        return env

    def turn(self, prompt: str, timeout: float | None = None) -> Run:
        which = ["--resume", self.session_id] if self.turns else ["--session-id", self.session_id]
        args = ["-p", prompt, "--model", CLAUDE_MODEL, "--allowedTools", "Bash", "--output-format", "json", *which]
        run = self.invoke(args, timeout)
        self.turns += 1
        return run

    def compact(self, timeout: float | None = None) -> Run:
        """A manual compaction (`/compact`) of the session."""
        return self.turn("/compact", timeout)

    @property
    def transcript(self) -> Path:
        """`~/.claude/projects/<cwd with every non-alphanumeric character as '-'>/<session id>.jsonl`."""
        escaped = re.sub(r"[^A-Za-z0-9]", "-", str(self.work))
        return self.home / ".claude" / "projects" / escaped / f"{self.session_id}.jsonl"

    def records(self) -> list[dict[str, Any]]:
        return jsonl(self.transcript)

    def compactions(self) -> list[dict[str, Any]]:
        """The transcript's compact_boundary records."""
        return [r for r in self.records() if r.get("type") == "system" and r.get("subtype") == "compact_boundary"]


@dataclass
class CodexSession(Session):
    """`codex exec --json` turns of one thread: the first starts it, the next `resume` it."""

    hooks: Hooks | None = None
    trust_hooks: bool = True
    config: str = ""
    """More config.toml lines (e.g. `model_auto_compact_token_limit = ...`)."""
    thread_id: str | None = None

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def prepare(self) -> None:
        super().prepare()
        self.codex_home.mkdir(parents=True, exist_ok=True)
        if self.hooks is not None:
            (self.codex_home / "hooks.json").write_text(json.dumps({"hooks": self.hooks}, indent=2))
        self.write_config()

    def write_config(self) -> None:
        """config.toml: the scripted model as the provider (once: what others add, `ctxbudget hooks install --trust`
        among them, stays), then the trust of every hook in hooks.json when `trust_hooks`."""
        config = self.codex_home / "config.toml"
        if not config.exists():
            lines = [
                f'model = "{CODEX_MODEL}"',
                'model_provider = "scripted"',
                self.config,
                "[model_providers.scripted]",
                'name = "scripted"',
                f'base_url = "{self.server.openai_url}"',
                'wire_api = "responses"',
                'env_key = "SCRIPTED_MODEL_KEY"',
            ]
            config.write_text("\n".join(lines) + "\n")
        hooks_file = self.codex_home / "hooks.json"
        if self.trust_hooks and hooks_file.exists():
            trust(hooks_file, config)

    def tool_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home), "SCRIPTED_MODEL_KEY": "scripted-model"}

    def turn(self, prompt: str, timeout: float | None = None) -> Run:
        common = ["--json", "--skip-git-repo-check", "-s", "danger-full-access"]
        args = (
            ["exec", *common, prompt] if self.thread_id is None else ["exec", *common, "resume", self.thread_id, prompt]
        )
        run = self.invoke(args, timeout)
        for event in (json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")):
            if event.get("type") == "thread.started":
                self.thread_id = event["thread_id"]
        return run

    @property
    def rollout(self) -> Path:
        if self.thread_id is None:
            raise AssertionError("the Codex thread has not started")
        found = sorted((self.codex_home / "sessions").rglob(f"rollout-*-{self.thread_id}.jsonl"))
        if not found:
            raise AssertionError(f"no rollout of thread {self.thread_id} under {self.codex_home / 'sessions'}")
        return found[-1]

    def records(self) -> list[dict[str, Any]]:
        return jsonl(self.rollout)

    def compactions(self) -> list[dict[str, Any]]:
        """The rollout's top-level `compacted` records (one per compaction in 0.169.0)."""
        return [r for r in self.records() if r.get("type") == "compacted"]
