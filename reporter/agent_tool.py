"""What an agent tool's package tells the rest of the reporter about it (issue 36): one `AgentTool`, in the
package's `tool.py`, listed once in reporter/tools.py.

The rest of the reporter (the `report` command, the hooks' installer and commands) reads a tool only through this,
so a third tool adds no branch there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.profiles import ClaudeCodeProfile
from reporter.git_facts import WorkFactTracker
from reporter.jsonl_tailer import JsonlTailer


@dataclass(frozen=True)
class ReadOptions:
    """What the command line says about reading files, for every tool's tailer (each takes what it needs)."""

    facts: WorkFactTracker
    claude_profile: ClaudeCodeProfile


@dataclass(frozen=True)
class FileSource:
    """The files of a tool that `ctxbudget report --from <name>` tails."""

    name: str
    """The `--from` value."""
    default_dir: Path
    """Where the tool writes them, read when `--dir` is not given."""
    state_name: str
    """The read positions' file in the worker state directory."""
    tailer: Callable[[Path, Path, ReadOptions], JsonlTailer[Any]]
    """(directory, read positions, options) -> the tailer that turns those files into readings and session events."""


@dataclass(frozen=True)
class AgentTool:
    name: str
    """The `--tool` value of `ctxbudget hook` and `hooks install`, written into the installed hook command."""
    profile: str
    """Its profile in core/profiles.py (where it compacts, the percent it shows): a snapshot's `agent_tool`."""
    files: FileSource
    hooks_config: Callable[[bool, Path, Path, Mapping[str, str]], Path]
    """(user scope, home, project, environment) -> the file that holds the tool's hooks."""
    after_install: Callable[[Path, bool], str] | None = None
    """(hooks config, --trust) -> what was done after our hooks were written, for a tool that asks more (trust)."""
    before_uninstall: Callable[[Path], str] | None = None
    """(hooks config) -> what was undone of `after_install`, run while our hooks are still in the file."""
    streams: tuple[str, ...] = ()
    """Other `--from` values its package reads, each wired by the `report` command (Codex's app-server)."""
