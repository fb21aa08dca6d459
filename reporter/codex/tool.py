"""Codex in the reporter's registry of tools (reporter/tools.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from core.profiles import CodexProfile
from reporter.agent_tool import AgentTool, FileSource, ReadOptions
from reporter.codex import trust
from reporter.codex.formats import codex_home
from reporter.codex.rollouts import RolloutTailer
from reporter.hook_command import ours

APP_SERVER_SOURCE = "codex-app-server"
"""`--from codex-app-server`: the app-server's notifications, on stdin or as its client (reporter/cli.py)."""


def _tailer(directory: Path, state: Path, options: ReadOptions) -> RolloutTailer:
    return RolloutTailer(directory, state, True, options.facts)


def hooks_config(user: bool, home: Path, project: Path, environ: Mapping[str, str]) -> Path:
    """`~/.codex/hooks.json` (user; `$CODEX_HOME` when set) or `<project>/.codex/hooks.json`."""
    if user:
        return (Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else home / ".codex") / "hooks.json"
    return project / ".codex" / "hooks.json"


def trust_hooks(hooks_file: Path, trusted: bool) -> str:
    """Codex runs only the hooks trusted in its config: ours, with `--trust`."""
    if not trusted:
        return "Codex runs a new hook only once you trust it: `--trust`, or review it in Codex's /hooks."
    config = codex_home() / "config.toml"
    return f"trusted {trust.trust(hooks_file, config, only=ours)} ctxbudget hooks in {config}"


def untrust_hooks(hooks_file: Path) -> str:
    config = codex_home() / "config.toml"
    return f"removed the trust of {trust.untrust(hooks_file, config, only=ours)} ctxbudget hooks from {config}"


TOOL = AgentTool(
    name="codex",
    profile=CodexProfile.name,
    files=FileSource("codex-rollouts", codex_home() / "sessions", "rollouts.json", _tailer),
    hooks_config=hooks_config,
    after_install=trust_hooks,
    before_uninstall=untrust_hooks,
    streams=(APP_SERVER_SOURCE,),
)
