"""deploy/local/setup.sh, which `make test` and `.ci/run` call: it installs exactly what is missing, and is silent
when nothing is. Run with a PATH of chosen commands and a recording `apt-get`, as root or through `sudo`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "local" / "setup.sh"
TOOLS = ("bash", "grep", "cat")
"""What the script itself runs besides the commands it checks for."""
RECORDING = '#!/bin/sh\necho "${{0##*/}} $*" >> "{log}"\n'


def _machine(tmp_path: Path, *, present: tuple[str, ...], root: bool, font: bool) -> tuple[dict[str, str], Path]:
    """A PATH holding the tools, the `present` commands (harmless stubs) and recording `apt-get` and `sudo`."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    for name in present:
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {0 if root else 1000}\n")
    (bin_dir / "dpkg-query").write_text(f"#!/bin/sh\n{'echo install ok installed' if font else 'exit 1'}\n")
    (bin_dir / "apt-get").write_text(RECORDING.format(log=log))
    (bin_dir / "sudo").write_text(RECORDING.format(log=log) + 'exec "$@"\n')
    for name in ("id", "dpkg-query", "apt-get", "sudo"):
        (bin_dir / name).chmod(0o755)
    chromium = tmp_path / "chromium"
    if "chromium" in present:
        chromium.write_text("")
        chromium.chmod(0o755)
    return {"PATH": str(bin_dir), "CTXBUDGET_CHROMIUM": str(chromium), "HOME": str(tmp_path)}, log


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False)


def test_nothing_is_installed_and_nothing_printed_when_everything_is_there(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, present=("java", "mvn", "npm", "make", "python3", "chromium"), root=True, font=True)
    done = _run(env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not log.exists()


def test_a_fresh_machine_gets_every_missing_package_in_one_update_and_install(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, present=("python3",), root=True, font=False)
    done = _run(env)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        "apt-get update -qq",
        "apt-get install -y -qq default-jre-headless maven chromium fonts-wqy-zenhei nodejs npm make",
    ]


def test_only_what_is_missing_is_installed_through_sudo_when_not_root(tmp_path: Path) -> None:
    env, log = _machine(tmp_path, present=("java", "mvn", "npm", "make", "python3"), root=False, font=True)
    done = _run(env)
    assert done.returncode == 0, done.stderr
    assert "installing chromium" in done.stderr
    assert log.read_text().splitlines() == [
        "sudo apt-get update -qq",
        "apt-get update -qq",
        "sudo apt-get install -y -qq chromium",
        "apt-get install -y -qq chromium",
    ]


def test_the_readme_commands_call_it(tmp_path: Path) -> None:
    root = SCRIPT.parents[2]
    assert "deploy/local/setup.sh" in (root / ".ci" / "run").read_text()
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=root, capture_output=True, text=True, check=True, env=os.environ | {"MAKEFLAGS": ""}
    )
    commands = dry.stdout.splitlines()
    assert commands.index("deploy/local/setup.sh") < next(i for i, c in enumerate(commands) if "pytest" in c)
