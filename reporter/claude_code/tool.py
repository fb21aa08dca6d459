"""Claude Code in the reporter's registry of tools (reporter/tools.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from core.profiles import ClaudeCodeProfile
from reporter.agent_tool import AgentTool, FileSource, ReadOptions
from reporter.claude_code.transcripts import TranscriptTailer


def _tailer(directory: Path, state: Path, options: ReadOptions) -> TranscriptTailer:
    return TranscriptTailer(directory, state, options.claude_profile, True, options.facts)


def hooks_config(user: bool, home: Path, project: Path, environ: Mapping[str, str]) -> Path:
    """`~/.claude/settings.json` (user) or `<project>/.claude/settings.json`."""
    return (home if user else project) / ".claude" / "settings.json"


TOOL = AgentTool(
    name="claude",
    profile=ClaudeCodeProfile.name,
    files=FileSource("claude-code", Path.home() / ".claude" / "projects", "claude-code.json", _tailer),
    hooks_config=hooks_config,
)
