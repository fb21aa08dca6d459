"""The real agent tools the suite drives: Claude Code and Codex CLI at pinned versions, installed from the npm registry
into a per-user cache (like the Kafka jars), and where to find their binaries.

`make test` runs `python -m tests.realtools.tools` before pytest: silent and instant when the pinned versions are
there, else one `npm install` (Claude Code's package holds a binary of about 370 MB). npm 11 skips Claude Code's
postinstall; the binaries run without it. Tests never install: a missing tool fails them with the command to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The one place the versions are pinned: Claude Code and Codex CLI as measured in docs/real-tools.md.
PINS: dict[str, str] = {"@anthropic-ai/claude-code": "2.1.328", "@openai/codex": "0.169.0"}
CACHE = Path(os.environ.get("CTXBUDGET_AGENT_TOOLS_CACHE", Path.home() / ".cache" / "ctxbudget" / "agent-tools"))


class ToolsMissing(RuntimeError):
    """The pinned tools are not installed (or npm is missing to install them)."""


@dataclass(frozen=True)
class Tools:
    claude: Path
    codex: Path


def install_dir() -> Path:
    """One folder per set of pins, so a change of version installs beside the old one instead of over it."""
    name = "+".join(f"{package.rsplit('/', 1)[-1]}-{version}" for package, version in sorted(PINS.items()))
    return CACHE / name


def _bins(root: Path) -> Tools:
    bin_dir = root / "node_modules" / ".bin"
    return Tools(claude=bin_dir / "claude", codex=bin_dir / "codex")


def _installed(root: Path) -> bool:
    manifest = root / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text()).get("dependencies") != PINS:
        return False
    return all(path.exists() for path in vars(_bins(root)).values())


def install() -> Tools:
    """The pinned tools, installed first when absent. Silent when present."""
    root = install_dir()
    if _installed(root):
        return _bins(root)
    npm = shutil.which("npm")
    if npm is None:
        raise ToolsMissing("npm is missing: run deploy/local/setup.sh (apt-get install nodejs npm)")
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"name": "ctxbudget-agent-tools", "private": True, "dependencies": PINS}
    (root / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"agent-tools: installing {' '.join(f'{p}@{v}' for p, v in PINS.items())} into {root}", file=sys.stderr)
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact"], cwd=root, check=True
    )
    if not _installed(root):
        raise ToolsMissing(f"npm install in {root} did not produce the claude and codex binaries")
    return _bins(root)


def tools() -> Tools:
    """The installed binaries; ToolsMissing (with the command that installs them) when absent."""
    root = install_dir()
    if not _installed(root):
        raise ToolsMissing(
            f"the real agent tools ({', '.join(f'{p}@{v}' for p, v in PINS.items())}) are not installed in {root}: "
            "run `make test`, or `python -m tests.realtools.tools` once"
        )
    return _bins(root)


if __name__ == "__main__":
    try:
        install()
    except (ToolsMissing, subprocess.CalledProcessError) as error:
        sys.exit(f"agent-tools: {error}")
