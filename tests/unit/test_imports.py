"""The package boundaries of pyproject.toml's import contracts: core knows no pipeline, the reporter and the API take
shared rules from core (the API never from the reporter), the reporter needs no pipeline extra, and only
streams.runtime knows Faust (the topology, the folds and the sinks' ClickHouse side declare against its Faust-free
Protocol). import-linter follows every import, function-level ones included, so a lazy import breaks a contract as
surely as one at the top."""

from __future__ import annotations

from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)  # the contracts name the repository's top-level packages
    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    assert status == 0, capsys.readouterr().out
