"""`ctxbudget hooks install`: our entries merged into the tool's hooks config, the user's own kept, idempotent."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ctxbudget.cli import app
from reporter.hook_command import hook_command, ours
from reporter.hooks.install import MATCHERS, Scope, config_path, merged, without_ours
from reporter.tools import Tool

USER_HOOKS = {
    "model": "opus",
    "hooks": {
        "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "~/bin/backup.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
    },
}


def _install(tmp_path: Path, *args: str) -> tuple[str, Path]:
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": ""}
    result = CliRunner().invoke(app, ["hooks", "install", "--program", "/opt/bin/ctxbudget", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout, tmp_path / "home"


def test_claude_user_hooks_are_written_with_matchers_and_printed(tmp_path: Path) -> None:
    out, home = _install(tmp_path, "--tool", "claude")
    path = home / ".claude" / "settings.json"
    written = json.loads(path.read_text())["hooks"]
    assert set(written) == set(MATCHERS) >= {"PostToolUse", "Stop", "UserPromptSubmit"}
    assert "matcher" not in written["PostToolUse"][0]  # after every tool call: the agent is told mid-turn
    pre = written["PreCompact"][0]
    assert pre["matcher"] == "auto|manual"
    assert pre["hooks"][0]["command"] == "/opt/bin/ctxbudget hook --tool claude"
    assert "matcher" not in written["Stop"][0]
    assert out.startswith(f"wrote {path}")
    assert '"/opt/bin/ctxbudget hook --tool claude"' in out


def test_the_users_other_hooks_and_settings_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USER_HOOKS))
    _install(tmp_path, "--tool", "claude")
    settings = json.loads(path.read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreToolUse"] == USER_HOOKS["hooks"]["PreToolUse"]
    assert settings["hooks"]["PreCompact"][0] == USER_HOOKS["hooks"]["PreCompact"][0]  # theirs first, ours after
    assert [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]] == [
        "notify-send done",
        "/opt/bin/ctxbudget hook --tool claude",
    ]


def test_installing_again_changes_nothing_and_an_upgrade_replaces_ours(tmp_path: Path) -> None:
    _install(tmp_path, "--tool", "claude")
    path = tmp_path / "home" / ".claude" / "settings.json"
    first = path.read_bytes()
    out, _ = _install(tmp_path, "--tool", "claude")
    assert out.startswith("already up to date:")
    assert path.read_bytes() == first
    _install(tmp_path, "--tool", "claude", "--api-url", "http://api:8000")
    commands = [h["command"] for g in json.loads(path.read_text())["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == ["/opt/bin/ctxbudget hook --tool claude --api-url http://api:8000"]


def test_codex_hooks_go_to_its_hooks_json(tmp_path: Path) -> None:
    out, home = _install(tmp_path, "--tool", "codex")
    written = json.loads((home / ".codex" / "hooks.json").read_text())
    assert written["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "/opt/bin/ctxbudget hook --tool codex"
    assert "/hooks" in out  # Codex runs a new hook once it is trusted
    project = tmp_path / "repo"
    _install(tmp_path, "--tool", "codex", "--scope", "project", "--project-dir", str(project))
    assert (project / ".codex" / "hooks.json").is_file()


def test_where_each_tool_reads_its_hooks(tmp_path: Path) -> None:
    home, project = tmp_path / "h", tmp_path / "p"
    assert config_path(Tool.CLAUDE, Scope.PROJECT, home, project, {}) == project / ".claude" / "settings.json"
    assert config_path(Tool.CODEX, Scope.USER, home, project, {"CODEX_HOME": "/srv/codex"}) == Path(
        "/srv/codex/hooks.json"
    )


def test_only_our_commands_are_ours() -> None:
    assert ours("/x/ctxbudget hook --tool codex")
    assert ours(hook_command("ctxbudget", Tool.CLAUDE, None))
    assert not ours("ctxbudget statusline")
    assert not ours("~/bin/ctxbudget-hook.sh")
    assert not ours("echo 'unbalanced")
    assert merged({}, "ctxbudget hook --tool claude") == merged(
        merged({}, "ctxbudget hook --tool claude"), "ctxbudget hook --tool claude"
    )


def test_a_config_not_in_the_tools_shape_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    for text in ('{"hooks": {"Stop": "notify"}}', "{not json", '{"hooks": []}'):
        path.write_text(text)
        result = CliRunner().invoke(app, ["hooks", "install", "--tool", "claude"], env={"HOME": str(tmp_path / "home")})
        assert result.exit_code == 2
        assert path.read_text() == text


def _uninstall(tmp_path: Path, *args: str) -> str:
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": ""}
    result = CliRunner().invoke(app, ["hooks", "uninstall", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_uninstall_takes_out_exactly_what_install_added_and_again_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    original = json.dumps(USER_HOOKS, indent=2) + "\n"
    path.write_text(original)
    _install(tmp_path, "--tool", "claude")
    assert path.read_text() != original
    assert _uninstall(tmp_path, "--tool", "claude").startswith(f"removed ctxbudget hooks from {path}")
    assert path.read_text() == original  # the user's hooks, groups and keys as they were
    assert _uninstall(tmp_path, "--tool", "claude").startswith(f"no ctxbudget hooks in {path}")
    assert path.read_text() == original


def test_uninstall_keeps_a_users_handler_sharing_a_group_with_ours_and_drops_what_only_we_added(
    tmp_path: Path,
) -> None:
    ours_command = "/opt/bin/ctxbudget hook --tool claude"
    shared = {
        "hooks": [{"type": "command", "command": "notify-send done"}, {"type": "command", "command": ours_command}]
    }
    settings = {"hooks": {"Stop": [shared], "PreToolUse": "not ours to judge"}}
    assert without_ours(settings) == {
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PreToolUse": settings["hooks"]["PreToolUse"],
        }
    }
    assert without_ours(merged({"model": "opus"}, ours_command)) == {"model": "opus"}
    assert without_ours({"model": "opus"}) == {"model": "opus"}


def test_uninstall_refuses_a_config_not_in_the_tools_shape_untouched(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    for text in ('{"hooks": {"Stop": "notify"}}', "{not json", '{"hooks": []}'):
        path.write_text(text)
        env = {"HOME": str(tmp_path / "home")}
        result = CliRunner().invoke(app, ["hooks", "uninstall", "--tool", "claude"], env=env)
        assert result.exit_code == 2
        assert path.read_text() == text
