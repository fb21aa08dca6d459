"""`ctxbudget hooks install --tool claude|codex [--scope user|project]`: writes our hook entries into the tool's
hooks config, merged with what is there; `ctxbudget hooks uninstall` takes them out again.

Where: each tool's `hooks_config` (reporter/<tool>/tool.py). Claude Code reads `hooks` from `~/.claude/settings.json`
(user) or `<project>/.claude/settings.json`; Codex reads `~/.codex/hooks.json` (user; `$CODEX_HOME` when set) or
`<project>/.codex/hooks.json`. Both files have
the same `hooks` shape: event -> [{"matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout": s}]}]
(Codex: codex-rs/config/src/hook_config.rs).

Merging: the user's other hooks, and every other key of the file, stay as they are; a group of ours (a command that
runs `ctxbudget ... hook`) is replaced by the current one, so installing again changes nothing (idempotent) and an
upgrade replaces the old entry instead of adding a second. The matchers select what the hook needs: compactions of
both triggers (reported, never held), session starts that resume from a package (startup: a relay thread; compact),
every tool call (PostToolUse without a matcher: the agent is told mid-turn), and every Stop and UserPromptSubmit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from reporter.atomic_file import write_atomically
from reporter.hook_command import hook_command, ours
from reporter.tools import Tool, agent_tool

HOOK_TIMEOUT_SECONDS = 15
"""The hook asks the API with a few seconds' timeout per request; the tool kills it after this."""
MATCHERS: dict[str, str | None] = {
    "PreCompact": "auto|manual",
    "PostCompact": "auto|manual",
    "SessionStart": "startup|compact",
    "Stop": None,
    "UserPromptSubmit": None,
    "PostToolUse": None,
}


class Scope(StrEnum):
    USER = "user"
    PROJECT = "project"


def config_path(tool: Tool, scope: Scope, home: Path, project: Path, environ: Mapping[str, str]) -> Path:
    return agent_tool(tool).hooks_config(scope is Scope.USER, home, project, environ)


def default_program() -> str:
    """The ctxbudget being run (absolute: the tool's hook shell may not have its directory on PATH)."""
    running = Path(sys.argv[0])
    if running.name == "ctxbudget" and running.is_file():
        return str(running.absolute())
    return shutil.which("ctxbudget") or "ctxbudget"


def our_entries(command: str) -> dict[str, list[dict[str, Any]]]:
    entries: dict[str, list[dict[str, Any]]] = {}
    for event, matcher in MATCHERS.items():
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}]
        entries[event] = [group]
    return entries


def _their_groups(event: str, groups: object) -> list[dict[str, Any]]:
    """An event's matcher groups without our handlers (a group left with none is dropped); ValueError for a value
    that is not the tools' shape."""
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError(f"`hooks.{event}` is not a list of matcher groups")
    kept = []
    for group in groups:
        handlers = [h for h in group.get("hooks", []) if not (isinstance(h, dict) and ours(h.get("command")))]
        if handlers or not group.get("hooks"):
            kept.append(group | {"hooks": handlers} if handlers != group.get("hooks") else group)
    return kept


def _hooks_of(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError("`hooks` is not an object")
    return hooks


def merged(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """`settings` with our entries in its `hooks`, the user's own entries kept in their order. Pure; ValueError for
    a `hooks` section that is not the tools' shape (it is left for the user to fix, never rewritten)."""
    hooks = dict(_hooks_of(settings))
    for event, groups in our_entries(command).items():
        hooks[event] = _their_groups(event, hooks.get(event, [])) + groups
    return settings | {"hooks": hooks}


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` without our handlers: what `merged` added is taken out (an event, then `hooks`, left empty by it
    goes too), everything else kept as it is. Pure; ValueError as `merged`."""
    hooks = _hooks_of(settings)
    left = dict(hooks)
    for event in MATCHERS.keys() & hooks.keys():
        theirs = _their_groups(event, hooks[event])
        if theirs != hooks[event]:
            left[event] = theirs
            if not theirs:
                del left[event]
    if left == hooks:
        return settings
    return settings | {"hooks": left} if left else {key: value for key, value in settings.items() if key != "hooks"}


def _rewritten(path: Path, command: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any] | None:
    """What `change` makes of the hooks config at `path` ({} when absent), or None when it changes nothing;
    BadParameter for a file not in the tools' shape, saying to run `command` again once it is fixed."""
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as error:
        raise typer.BadParameter(f"{path} is not JSON ({error}); fix or move it, then {command} again") from error
    if not isinstance(current, dict):
        raise typer.BadParameter(f"{path} does not hold a JSON object")
    try:
        updated = change(current)
    except ValueError as error:
        raise typer.BadParameter(f"{path}: {error}; fix it, then {command} again") from error
    return None if updated == current else updated


def _write(path: Path, settings: dict[str, Any]) -> None:
    write_atomically(path, (json.dumps(settings, indent=2) + "\n").encode())


def install(path: Path, command: str) -> bool:
    """Writes the merged config; False when it already held exactly our entries (nothing written)."""
    updated = _rewritten(path, "install", lambda current: merged(current, command))
    if updated is not None:
        _write(path, updated)
    return updated is not None


hooks_app = typer.Typer(help="The agent tools' hooks that make a thread hand off before its compaction.")


@hooks_app.command("install")
def install_command(
    tool: Annotated[Tool, typer.Option(help="The agent tool whose hooks config to write.")],
    scope: Annotated[Scope, typer.Option(help="user: every project; project: this directory's.")] = Scope.USER,
    api_url: Annotated[
        str | None,
        typer.Option(help="Put the API's URL in the command (else the hook reads CTXBUDGET_API_URL)."),
    ] = None,
    program: Annotated[
        str | None, typer.Option(help="The ctxbudget executable the tool runs (default: this one).")
    ] = None,
    project_dir: Annotated[Path, typer.Option(help="--scope project: the project.")] = Path(),
    trust: Annotated[
        bool,
        typer.Option(
            help="Codex: trust these hooks in $CODEX_HOME/config.toml, as its TUI's 'Trust all' does (Codex runs no "
            "untrusted hook); only ctxbudget's hooks are trusted."
        ),
    ] = False,
) -> None:
    """Write ctxbudget's PreCompact, PostCompact, SessionStart, Stop, UserPromptSubmit and PostToolUse hooks, keeping
    the rest."""
    path = config_path(tool, scope, Path.home(), project_dir.resolve(), os.environ)
    command = hook_command(program or default_program(), tool, api_url)
    written = install(path, command)
    typer.echo(f"{'wrote' if written else 'already up to date:'} {path}")
    typer.echo(json.dumps({"hooks": our_entries(command)}, indent=2))
    typer.echo(
        "The hook, and the `handoff write` it tells the agent to run, read CTXBUDGET_WORKER_TOKEN (and "
        "CTXBUDGET_API_URL) from the tool's environment."
    )
    after_install = agent_tool(tool).after_install
    if after_install is not None:
        typer.echo(after_install(path, trust))


@hooks_app.command("uninstall")
def uninstall_command(
    tool: Annotated[Tool, typer.Option(help="The agent tool whose hooks config to clean.")],
    scope: Annotated[Scope, typer.Option(help="user: every project; project: this directory's.")] = Scope.USER,
    project_dir: Annotated[Path, typer.Option(help="--scope project: the project.")] = Path(),
) -> None:
    """Remove what `hooks install` wrote: ctxbudget's hook entries (and, for Codex, their trust), keeping the rest.
    Running it again changes nothing."""
    path = config_path(tool, scope, Path.home(), project_dir.resolve(), os.environ)
    updated = _rewritten(path, "uninstall", without_ours)
    before_uninstall = agent_tool(tool).before_uninstall
    if before_uninstall is not None and path.exists():
        typer.echo(before_uninstall(path))  # before the hooks go: a trust names each hook by its place in the file
    if updated is not None:
        _write(path, updated)
    typer.echo(f"{'removed ctxbudget hooks from' if updated is not None else 'no ctxbudget hooks in'} {path}")
