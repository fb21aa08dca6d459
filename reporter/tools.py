"""The agent tools the reporter knows, one line each (issue 36): every list that names a tool is taken from here.

`ctxbudget report --from` (reporter/cli.py's `Source`), the tailer and defaults of each tool's files, the `--tool` of
`ctxbudget hook` and `hooks install` (`Tool`), where each tool keeps its hooks and what installing them asks more.
A third tool is a package beside claude_code/ and codex/ with its `tool.py`, and its line here;
tests/unit/reporter/test_tools.py fails for a tool package missing here, and for an entry core/profiles.py lacks.
"""

from __future__ import annotations

from enum import StrEnum

from reporter.agent_tool import AgentTool, FileSource
from reporter.claude_code import tool as claude_code
from reporter.codex import tool as codex

TOOLS: tuple[AgentTool, ...] = (
    claude_code.TOOL,
    codex.TOOL,
)

Tool = StrEnum("Tool", {t.name.upper(): t.name for t in TOOLS})
"""`--tool` of `ctxbudget hook` and `hooks install`."""
FILE_SOURCES: dict[str, FileSource] = {t.files.name: t.files for t in TOOLS}
"""`--from` values of tailed files (several may be given together)."""


def agent_tool(name: str) -> AgentTool:
    return next(t for t in TOOLS if t.name == name)
