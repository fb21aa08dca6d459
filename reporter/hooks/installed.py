"""The hook command `hooks install` writes into a tool's config, and how to know it again among the user's own."""

from __future__ import annotations

import shlex
from pathlib import Path


def hook_command(program: str, tool: str, api_url: str | None) -> str:
    parts = [program, "hook", "--tool", tool] + (["--api-url", api_url] if api_url else [])
    return shlex.join(parts)


def ours(command: object) -> bool:
    """A command this installer wrote: it runs a `ctxbudget` program with the `hook` subcommand."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 2 and Path(words[0]).name == "ctxbudget" and words[1] == "hook"
