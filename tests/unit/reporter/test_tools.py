"""The registry of agent tools (reporter/tools.py) is complete: every tool package is in it, every list that names a
tool is taken from it, and core/profiles.py knows each tool."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import reporter
from core.profiles import ClaudeCodeProfile, ProfileSet
from reporter.agent_tool import AgentTool, ReadOptions
from reporter.cli import EVENTS, Source
from reporter.git_facts import WorkFactTracker
from reporter.jsonl_tailer import JsonlTailer
from reporter.tools import FILE_SOURCES, TOOLS, Tool

ROOT = Path(__file__).parents[3]
SHARED_PACKAGES = {"delivery", "hooks", "relay"}
"""reporter/'s packages that serve every tool; any other package is a tool's."""


def _tool_packages() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(reporter.__path__) if m.ispkg} - SHARED_PACKAGES


def test_every_tool_package_has_its_line_in_the_registry() -> None:
    packages = {name: importlib.import_module(f"reporter.{name}.tool").TOOL for name in _tool_packages()}
    assert [name for name, tool in packages.items() if tool not in TOOLS] == [], "not in reporter/tools.py's TOOLS"
    assert len(packages) == len(TOOLS), "an entry of TOOLS has no package of its own"


def test_no_tool_package_imports_another_s() -> None:
    """The import-linter contract that keeps tool packages apart names every one of them."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    independent = [set(c["modules"]) for c in contracts if c["type"] == "independence"]
    assert {f"reporter.{name}" for name in _tool_packages()} in independent


def test_the_cli_choices_are_the_registry_s() -> None:
    assert {s.value for s in Source} == {EVENTS, *FILE_SOURCES, *(s for t in TOOLS for s in t.streams)}
    assert {t.value for t in Tool} == {t.name for t in TOOLS}
    names = [t.name for t in TOOLS] + [s for t in TOOLS for s in (t.files.name, *t.streams)]
    assert len(names) == len(set(names))
    assert len({t.files.state_name for t in TOOLS}) == len(TOOLS)


def test_core_knows_every_tool_s_profile_and_model_names() -> None:
    profiles = ProfileSet()
    chosen = {name for _, name in profiles.by_model_prefix}
    for tool in TOOLS:
        assert tool.profile in profiles.profiles
        assert tool.profile in chosen, f"no model prefix picks {tool.profile}'s profile"


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_each_tool_s_files_and_hooks_are_its_own(tool: AgentTool, tmp_path: Path) -> None:
    options = ReadOptions(WorkFactTracker(), ClaudeCodeProfile())
    tailer = tool.files.tailer(tmp_path, tmp_path / tool.files.state_name, options)
    assert isinstance(tailer, JsonlTailer)
    assert tailer.poll() == []  # an empty directory reads as nothing, not as an error
    home, project = tmp_path / "home", tmp_path / "project"
    user, here = tool.hooks_config(True, home, project, {}), tool.hooks_config(False, home, project, {})
    assert user.is_relative_to(home)
    assert here.is_relative_to(project)
    others = [t.hooks_config(False, home, project, {}) for t in TOOLS if t is not tool]
    assert here not in others
