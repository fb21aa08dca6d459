"""ClickHouse through clickhouse-connect (embedded chdb unless a DSN is configured): migrations and a row round trip."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from schemas import Codec, ThreadContextSnapshot
from sinks.migrations import MIGRATIONS, Migration, MigrationDrift, applied, migrate
from tests.samples import SNAPSHOT, dumps

pytestmark = pytest.mark.clickhouse


def test_migrations_apply_once_and_then_are_up_to_date(clickhouse) -> None:
    # one version each, no gap: branches that each added "the next" migration must be renumbered when merged
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    migrate(clickhouse)  # first run on a fresh database (or no-op if an earlier test applied them)
    assert migrate(clickhouse) == []  # second run: nothing left, no error
    assert applied(clickhouse) == {m.version: m.checksum for m in MIGRATIONS}
    tables = {row[0] for row in clickhouse.query("SHOW TABLES").result_rows}
    assert {"thread_context_snapshots", "deadletter", "schema_migrations"} <= tables


def test_an_edited_released_migration_is_refused(clickhouse) -> None:
    migrate(clickhouse)
    first = MIGRATIONS[0]
    edited = Migration(first.version, first.name, (*first.statements, "SELECT 1"))
    with pytest.raises(MigrationDrift, match="must not change"):
        migrate(clickhouse, (edited, *MIGRATIONS[1:]))


def test_a_new_migration_is_applied_after_the_released_ones(clickhouse) -> None:
    migrate(clickhouse)
    table = f"probe_{uuid.uuid4().hex[:8]}"
    extra = Migration(
        10_000 + int(uuid.uuid4().int % 10_000),
        f"probe {table}",
        (f"CREATE TABLE IF NOT EXISTS {table} (x UInt8) ENGINE = Memory",),
    )
    assert migrate(clickhouse, (*MIGRATIONS, extra)) == [extra]
    assert migrate(clickhouse, (*MIGRATIONS, extra)) == []
    assert clickhouse.query(f"EXISTS TABLE {table}").result_rows == [(1,)]


def test_snapshot_row_round_trips(clickhouse) -> None:
    migrate(clickhouse)
    snapshot = Codec(ThreadContextSnapshot).decode(dumps({**SNAPSHOT, "snapshot_id": f"snap-{uuid.uuid4().hex}"}))
    row = snapshot.model_dump(mode="python")
    columns = list(row)
    clickhouse.insert("thread_context_snapshots", [[row[c] for c in columns]], column_names=columns)

    result = clickhouse.query(
        f"SELECT {', '.join(columns)} FROM thread_context_snapshots WHERE snapshot_id = {{id:String}}",
        parameters={"id": snapshot.snapshot_id},
    )
    assert len(result.result_rows) == 1
    back = ThreadContextSnapshot.model_validate(dict(zip(columns, result.result_rows[0], strict=True)))
    assert back == snapshot
    assert back.captured_at.tzinfo is not None


def test_repeated_batch_with_same_token_is_written_once(clickhouse) -> None:
    migrate(clickhouse)
    received = datetime.now(UTC)
    topic = f"ctx.test-{uuid.uuid4().hex[:8]}"
    rows = [[received, topic, 0, offset, "invalid_json", "", None, "eyJ4Ijo="] for offset in range(5)]
    columns = [
        "received_at",
        "source_topic",
        "partition",
        "offset",
        "reason",
        "detail",
        "original_key",
        "original_value",
    ]
    token = f"deadletter:{topic}:0:0-4"
    for _ in range(2):
        clickhouse.insert("deadletter", rows, column_names=columns, settings={"insert_deduplication_token": token})
    count = clickhouse.query("SELECT count() FROM deadletter WHERE source_topic = {t:String}", parameters={"t": topic})
    assert count.result_rows == [(5,)]
