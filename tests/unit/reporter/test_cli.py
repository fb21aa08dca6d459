"""`ctxbudget report`'s options."""

from __future__ import annotations

from typer.testing import CliRunner

from ctxbudget.cli import app


def test_report_options_set_the_fact_patterns() -> None:
    import pytest
    import typer

    from reporter.cli import fact_patterns
    from reporter.git_facts import DEFAULT_TEST_PATTERNS, FactPatterns

    assert fact_patterns(None, None, None, None) == FactPatterns()
    given = fact_patterns([r"\bmake check\b"], ["docs/rfc/*"], [r"\bflashrom\b"], [r"\bssh node-\d+ wait\b"])
    assert (given.test, given.decision_paths, given.hardware, given.waiting) == (
        (r"\bmake check\b",),
        ("docs/rfc/*",),
        (r"\bflashrom\b",),
        (r"\bssh node-\d+ wait\b",),
    )
    assert given.matches(given.test, "make check -j4")
    assert not given.matches(given.test, "pytest -q")  # a given list replaces the defaults
    assert FactPatterns().test == DEFAULT_TEST_PATTERNS
    with pytest.raises(typer.BadParameter):
        fact_patterns(["(unclosed"], None, None, None)
    help_text = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"}).stdout
    for option in ("--test-command", "--decision-path", "--hardware-command", "--waiting-command"):
        assert option in help_text
