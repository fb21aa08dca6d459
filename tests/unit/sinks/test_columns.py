"""Every column the sinks write is one the migrations create: a field added to a stored model becomes a column of its
table (`sinks.rows.stored`), and this fails until a migration adds it, instead of the inserts failing once deployed.
Read from the DDL text, without ClickHouse (tests/integration/test_sinks_clickhouse.py round-trips every route)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from pydantic import BaseModel

from api.views import THREAD_DETAIL_FROM_REPORT, THREAD_DETAIL_FROM_STATE
from schemas import ThreadContextSnapshot
from sinks.migrations import MIGRATIONS
from sinks.queries import PROJECTION_OVERLAY
from sinks.rows import TableSpec, stored
from sinks.tables import TABLES, THREAD_CONTEXT_LATEST, THREAD_CONTEXT_SNAPSHOTS

CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)\s*\((.*?)\)\s*ENGINE", re.DOTALL)
ALTER = re.compile(r"ALTER TABLE (\w+)\s+(ADD COLUMN.*)", re.DOTALL)
ADDED = re.compile(r"ADD COLUMN IF NOT EXISTS (\w+)")


def migrated_columns() -> dict[str, set[str]]:
    """Per table, the columns its migrations create or add, in order of release."""
    tables: dict[str, set[str]] = defaultdict(set)
    for migration in MIGRATIONS:
        for statement in migration.statements:
            if created := CREATE.search(statement):
                lines = created.group(2).strip().splitlines()
                tables[created.group(1)] |= {line.split()[0] for line in lines if line.strip()}
            elif altered := ALTER.search(statement):
                tables[altered.group(1)] |= set(ADDED.findall(altered.group(2)))
    return dict(tables)


MIGRATED = migrated_columns()


def unmigrated(spec: TableSpec) -> set[str]:
    return set(spec.column_names) - MIGRATED.get(spec.name, set())


@pytest.mark.parametrize("spec", TABLES, ids=lambda spec: spec.name)
def test_every_column_a_sink_writes_is_created_by_a_migration(spec: TableSpec) -> None:
    assert unmigrated(spec) == set(), f"{spec.name}: add the columns in a new migration (sinks/migrations.py)"


def test_a_field_added_to_a_stored_model_is_a_column_no_migration_has_created_yet() -> None:
    widened = type("Widened", (ThreadContextSnapshot,), {"__annotations__": {"os_version": str | None}})
    spec = TableSpec(THREAD_CONTEXT_SNAPSHOTS.name, stored(widened, key="snapshot_id"))
    assert unmigrated(spec) == {"os_version"}


def test_a_skipped_field_must_be_one_of_the_model() -> None:
    class Shape(BaseModel):
        key: str
        value: int

    assert [c.name for c in stored(Shape, key="value", skip=())] == ["value", "key"]
    with pytest.raises(ValueError, match="Shape has no field valeu"):
        stored(Shape, key="key", skip=("valeu",))


def test_the_parsed_ddl_knows_every_table_and_the_columns_added_later() -> None:
    assert {spec.name for spec in TABLES} <= set(MIGRATED)
    assert {"agent_tool", "model", "shown_remaining_pct", "captured_at"} <= MIGRATED["thread_context_snapshots"]


def test_every_field_the_thread_detail_copies_is_a_column_of_the_table_it_reads() -> None:
    """A snapshot field added to the detail is read from the snapshot history, a state field from the latest row."""
    latest = {*THREAD_CONTEXT_LATEST.column_names, *PROJECTION_OVERLAY}
    assert set(THREAD_DETAIL_FROM_STATE) <= latest
    assert set(THREAD_DETAIL_FROM_REPORT) <= set(THREAD_CONTEXT_SNAPSHOTS.column_names)
    assert {"shown_remaining_pct", "agent_tool", "model"} <= set(THREAD_DETAIL_FROM_REPORT)
