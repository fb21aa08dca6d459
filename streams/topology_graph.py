"""The topology drawn from its declaration (`core.folds`): topic -> fold -> table -> topic, by role, as text or mermaid.

`ctxbudget topology` prints it; docs/architecture.md's diagram is the mermaid drawing between `README_START` and
`README_END` (`ctxbudget topology --readme docs/architecture.md` rewrites it), and a unit test fails when that block is
stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from core.folds import FOLDS, Fold
from core.settings import ROLES
from core.topics import TOPICS
from sinks.tables import ROUTES, Route

README_START = "<!-- topology:start (generated: ctxbudget topology --readme docs/architecture.md) -->"
README_END = "<!-- topology:end -->"
KEYS = {spec.name: spec.key for spec in TOPICS}


class GraphFormat(StrEnum):
    TEXT = "text"
    MERMAID = "mermaid"


def render(format: GraphFormat, folds: Sequence[Fold] = FOLDS, routes: Mapping[str, Route] = ROUTES) -> str:
    return text(folds, routes) if format is GraphFormat.TEXT else mermaid(folds, routes)


def by_role(folds: Iterable[Fold]) -> dict[str, list[Fold]]:
    """The folds grouped by the roles that run them ("engine, projection"), groups in order of first appearance."""
    groups: dict[str, list[Fold]] = {}
    for fold in folds:
        groups.setdefault(", ".join(role for role in ROLES if role in fold.roles), []).append(fold)
    return groups


def clickhouse_tables(fold: Fold, routes: Mapping[str, Route]) -> list[str]:
    """The ClickHouse tables a sink fold writes, from the routes of its inputs, each once."""
    if not fold.clickhouse:
        return []
    tables = (target.table.name for topic in fold.inputs if topic in routes for target in routes[topic].targets)
    return list(dict.fromkeys(tables))


def _title(fold: Fold) -> str:
    return f"{fold.name} (+ timer)" if fold.timer else fold.name


def text(folds: Sequence[Fold] = FOLDS, routes: Mapping[str, Route] = ROUTES) -> str:
    lines: list[str] = []
    for roles, members in by_role(folds).items():
        lines.append(f"{roles}:")
        for fold in members:
            lines.append(f"  {_title(fold)}")
            lines += [f"    <- {topic} [{KEYS[topic]}]" for topic in fold.inputs]
            if fold.table is not None:
                lines.append(f"    table: {fold.table}")
            lines += [f"    -> {topic} [{KEYS[topic]}]" for topic in fold.outputs]
            lines += [f"    => ClickHouse {table}" for table in clickhouse_tables(fold, routes)]
        lines.append("")
    return "\n".join(lines)


def _id(topic: str) -> str:
    return "t_" + topic.replace("-", "_")


def mermaid(folds: Sequence[Fold] = FOLDS, routes: Mapping[str, Route] = ROUTES) -> str:
    """A flowchart: topics as stadiums, each role's folds (with their table) in a subgraph, ClickHouse as a cylinder."""
    topics = dict.fromkeys(topic for fold in folds for topic in (*fold.inputs, *fold.outputs))
    lines = ["flowchart LR"]
    lines += [f'    {_id(topic)}(["{topic}"])' for topic in topics]
    edges: list[str] = []
    for index, (roles, members) in enumerate(by_role(folds).items()):
        lines.append(f'    subgraph role_{index}["{roles}"]')
        for fold in members:
            label = _title(fold) + (f"<br/>table: {fold.table}" if fold.table else "")
            lines.append(f'        {fold.name}[["{label}"]]')
            edges += [f"    {_id(topic)} --> {fold.name}" for topic in fold.inputs]
            edges += [f"    {fold.name} --> {_id(topic)}" for topic in fold.outputs]
            tables = clickhouse_tables(fold, routes)
            if tables:
                edges.append(f'    {fold.name} --> ch_{fold.name}[("ClickHouse<br/>{"<br/>".join(tables)}")]')
        lines.append("    end")
    return "\n".join([*lines, *edges]) + "\n"


def readme_block(folds: Sequence[Fold] = FOLDS, routes: Mapping[str, Route] = ROUTES) -> str:
    return f"{README_START}\n```mermaid\n{mermaid(folds, routes)}```\n{README_END}"


def with_readme_block(readme: str, block: str) -> str:
    """`readme` with its marked topology block replaced by `block`."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"no {README_START!r} ... {README_END!r} block")
    return readme[:start] + block + readme[end + len(README_END) :]
