"""Codex's trust of our hooks (`hooks install --tool codex --trust`): ours trusted, the user's config kept."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from reporter.codex.trust import snake_case, trusted_config, untrusted_config
from reporter.hooks.install import MATCHERS
from tests.unit.reporter.hooks.test_install import USER_HOOKS, _install, _uninstall


def test_codex_trust_covers_our_hooks_only_and_keeps_the_users_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "hooks.json").write_text(json.dumps(USER_HOOKS))
    user_config = 'model = "gpt-5.5"\n\n[hooks.state."/elsewhere:stop:0:0"]\ntrusted_hash = "sha256:theirs"\n'
    (home / ".codex" / "config.toml").write_text(user_config)
    out, _ = _install(tmp_path, "--tool", "codex", "--trust")
    hooks_file = home / ".codex" / "hooks.json"
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    trusted = config["hooks"]["state"]
    assert config["model"] == "gpt-5.5"
    assert trusted["/elsewhere:stop:0:0"] == {"trusted_hash": "sha256:theirs"}
    ours_trusted = {key for key in trusted if key.startswith(str(hooks_file))}
    # one per event of ours (PreCompact and Stop come after the user's own group: index 1), none of the user's hooks
    assert ours_trusted == {
        f"{hooks_file}:{snake_case(e)}:{1 if e in ('PreCompact', 'Stop') else 0}:0" for e in MATCHERS
    }
    assert f"trusted {len(MATCHERS)} ctxbudget hooks" in out
    before = (home / ".codex" / "config.toml").read_text()
    _install(tmp_path, "--tool", "codex", "--trust")
    assert (home / ".codex" / "config.toml").read_text() == before  # again: the same tables, none repeated


def test_a_trusted_table_is_replaced_in_place_of_being_repeated() -> None:
    config = '[hooks.state."/h.json:stop:0:0"]\ntrusted_hash = "sha256:old"\n\n[tui]\ntheme = "dark"\n'
    updated = trusted_config(config, {"/h.json:stop:0:0": "sha256:new"})
    assert tomllib.loads(updated) == {
        "tui": {"theme": "dark"},
        "hooks": {"state": {"/h.json:stop:0:0": {"trusted_hash": "sha256:new"}}},
    }


def test_uninstall_takes_our_hooks_and_their_trust_out_and_leaves_the_users_config_as_it_was(tmp_path: Path) -> None:
    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True)
    hooks = json.dumps(USER_HOOKS, indent=2) + "\n"
    (codex / "hooks.json").write_text(hooks)
    user_config = 'model = "gpt-5.5"\n\n[hooks.state."/elsewhere:stop:0:0"]\ntrusted_hash = "sha256:theirs"\n'
    (codex / "config.toml").write_text(user_config)
    _install(tmp_path, "--tool", "codex", "--trust")
    out = _uninstall(tmp_path, "--tool", "codex")
    assert f"removed the trust of {len(MATCHERS)} ctxbudget hooks" in out
    assert (codex / "config.toml").read_text() == user_config
    assert (codex / "hooks.json").read_text() == hooks
    assert "removed the trust of 0 ctxbudget hooks" in _uninstall(tmp_path, "--tool", "codex")
    assert (codex / "config.toml").read_text() == user_config


def test_untrusting_keeps_every_other_table_and_a_config_without_ours_byte_for_byte() -> None:
    config = '[hooks.state."/h.json:stop:0:0"]\ntrusted_hash = "sha256:ours"\n\n[tui]\ntheme = "dark"  # mine\n'
    assert untrusted_config(config, ["/h.json:stop:0:0"]) == '[tui]\ntheme = "dark"  # mine\n'
    assert untrusted_config("model = 1\n\n\n", ["/h.json:stop:0:0"]) == "model = 1\n\n\n"
