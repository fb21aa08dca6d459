"""`ctxbudget topology` draws the declared folds (core/folds.py), and docs/architecture.md's diagram is that drawing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.folds import FOLDS, SINKS_FOLD, Fold
from core.topics import DEADLETTER, SNAPSHOTS, THREAD_STATE
from ctxbudget.cli import app
from sinks.tables import ROUTES
from streams.topology_graph import (
    README_END,
    README_START,
    by_role,
    clickhouse_tables,
    mermaid,
    readme_block,
    text,
    with_readme_block,
)

ARCHITECTURE = Path(__file__).parents[3] / "docs" / "architecture.md"
FOLD = Fold(
    "fold_a", frozenset({"sinks", "engine"}), (SNAPSHOTS,), (THREAD_STATE, DEADLETTER), table="slots", timer=True
)


def test_the_architecture_diagram_is_the_declared_topology() -> None:
    readme = ARCHITECTURE.read_text()
    assert readme.count(README_START) == 1
    assert readme.count(README_END) == 1
    current = readme[readme.index(README_START) : readme.index(README_END) + len(README_END)]
    stale = "docs/architecture.md's topology is stale: run `ctxbudget topology --readme docs/architecture.md`"
    assert current == readme_block(), stale


def test_the_text_names_each_fold_with_its_role_inputs_table_and_outputs() -> None:
    assert text([FOLD], {}) == "\n".join(
        [
            "engine, sinks:",
            "  fold_a (+ timer)",
            "    <- snapshots [thread_id]",
            "    table: slots",
            "    -> thread-state [thread_id]",
            "    -> deadletter [source key]",
            "",
        ]
    )


def test_the_mermaid_graph_has_an_edge_for_every_declared_input_and_output() -> None:
    lines = set(mermaid().splitlines())
    for fold in FOLDS:
        for topic in fold.inputs:
            assert f"    t_{topic.replace('-', '_')} --> {fold.name}" in lines
        for topic in fold.outputs:
            assert f"    {fold.name} --> t_{topic.replace('-', '_')}" in lines
    edges = [line for line in lines if " --> " in line]
    declared = sum(len(fold.inputs) + len(fold.outputs) + fold.clickhouse for fold in FOLDS)
    assert len(edges) == declared


def test_only_the_sinks_write_clickhouse_each_routed_table_once() -> None:
    tables = clickhouse_tables(SINKS_FOLD, ROUTES)
    assert set(tables) == {target.table.name for route in ROUTES.values() for target in route.targets}
    assert len(tables) == len(set(tables))
    assert [fold for fold in FOLDS if clickhouse_tables(fold, ROUTES)] == [SINKS_FOLD]


def test_folds_are_grouped_by_the_roles_that_run_them() -> None:
    groups = by_role(FOLDS)
    assert groups["engine, projection"] == [fold for fold in FOLDS if fold.roles == {"engine", "projection"}]
    assert sum(len(members) for members in groups.values()) == len(FOLDS)


def test_the_readme_block_is_replaced_in_place_and_a_file_without_one_is_refused() -> None:
    before, after = "# title\n\n", "\n\n## next\n"
    assert with_readme_block(f"{before}{README_START}\nold\n{README_END}{after}", "NEW") == f"{before}NEW{after}"
    with pytest.raises(ValueError, match="topology:start"):
        with_readme_block("# no block", "NEW")


def test_the_command_prints_either_format_and_rewrites_a_readme(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["topology"]).stdout == text()
    assert runner.invoke(app, ["topology", "--format", "mermaid"]).stdout == mermaid()
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nstale\n{README_END}\nrest\n")
    result = runner.invoke(app, ["topology", "--readme", str(readme)])
    assert result.exit_code == 0, result.output
    assert readme.read_text() == f"intro\n{readme_block()}\nrest\n"
    (tmp_path / "plain.md").write_text("no block\n")
    assert runner.invoke(app, ["topology", "--readme", str(tmp_path / "plain.md")]).exit_code == 1
