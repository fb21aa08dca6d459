"""The operator token `ctxbudget run` hands out: in a file of its owner's only, short-lived, and never on stdout."""

from __future__ import annotations

import re
import stat
import time
from pathlib import Path

import jwt

from api.cli import operator_token_line, save_operator_token
from api.settings import ApiSettings
from api.tokens import Role, verify_token
from core.settings import Settings

SECRET = "k" * 40
JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")


def _settings(tmp_path: Path) -> tuple[Settings, ApiSettings]:
    return Settings(data_dir=tmp_path / "data"), ApiSettings(token_secret=SECRET)


def test_the_token_file_is_the_owners_only_and_holds_a_short_lived_operator_token(tmp_path: Path) -> None:
    settings, api = _settings(tmp_path)
    path = save_operator_token(settings, api)
    assert path == settings.resolved_data_dir / "operator-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = path.read_text().strip()
    principal = verify_token(SECRET.encode(), token)
    assert principal.role is Role.OPERATOR

    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] <= 24 * 3600  # the default lifetime is a working day, not a month
    assert claims["exp"] > time.time()


def test_a_new_token_replaces_one_whose_file_was_made_readable(tmp_path: Path) -> None:
    settings, api = _settings(tmp_path)
    path = save_operator_token(settings, api)
    path.chmod(0o644)
    path.write_text("old\n")
    assert save_operator_token(settings, api) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() != "old"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".operator-token")] == []


def test_the_printed_line_names_the_file_and_how_to_get_another_but_not_the_token(tmp_path: Path) -> None:
    settings, api = _settings(tmp_path)
    line = operator_token_line(settings, api)
    assert JWT.search(line) is None, line
    path = Path(line.removeprefix("operator token: ").split()[0])
    assert JWT.fullmatch(path.read_text().strip())
    assert "ctxbudget token --role operator" in line
