"""Versioned, idempotent ClickHouse DDL, applied in order by `ctxbudget migrate` and recorded in `schema_migrations`.

A migration is never edited once released: its checksum is recorded, and `migrate` refuses to run when an applied
migration's text no longer matches (drift). New tables and changes come as new migrations. Every statement is written
to be re-runnable (IF NOT EXISTS), so a migrate interrupted between a statement and its record is safe to repeat.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

MIGRATIONS_TABLE = "schema_migrations"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]

    @property
    def checksum(self) -> str:
        return hashlib.sha256("\n;\n".join(self.statements).encode()).hexdigest()


class MigrationDrift(RuntimeError):
    pass


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "thread_context_snapshots history and deadletter",
        (
            # Every accepted snapshot (spec 3.2). Partitioned by month, ordered for per-project / per-thread timelines.
            # The dedup window makes a retried batch with the same insert_deduplication_token a no-op.
            """
            CREATE TABLE IF NOT EXISTS thread_context_snapshots
            (
                snapshot_id String,
                project_id LowCardinality(String),
                task_id Nullable(String),
                thread_id String,
                node_id LowCardinality(String),
                worker_id LowCardinality(String),
                source_kind LowCardinality(String),
                context_budget_remaining_pct Float32,
                context_budget_level LowCardinality(String),
                compaction_expected_at Nullable(DateTime64(3, 'UTC')),
                must_finish_before_compaction Bool,
                estimated_remaining_turns Nullable(UInt32),
                estimated_remaining_large_messages Nullable(UInt32),
                last_compaction_at Nullable(DateTime64(3, 'UTC')),
                compaction_count UInt32,
                snapshot_version UInt64,
                captured_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD),
                schema_version UInt8
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(captured_at)
            ORDER BY (project_id, thread_id, captured_at, snapshot_id)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS deadletter
            (
                received_at DateTime64(3, 'UTC'),
                source_topic LowCardinality(String),
                partition UInt32,
                offset UInt64,
                reason LowCardinality(String),
                detail String,
                original_key Nullable(String),
                original_value Nullable(String) CODEC(ZSTD)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(received_at)
            ORDER BY (source_topic, received_at, partition, offset)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
        ),
    ),
)


def _ensure_migrations_table(client: Client) -> None:
    client.command(
        f"""
        CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE}
        (
            version UInt32,
            name String,
            checksum String,
            applied_at DateTime64(3, 'UTC')
        )
        ENGINE = ReplacingMergeTree(applied_at)
        ORDER BY version
        """
    )


def applied(client: Client) -> dict[int, str]:
    """Applied migration versions and their checksums."""
    _ensure_migrations_table(client)
    rows = client.query(f"SELECT version, checksum FROM {MIGRATIONS_TABLE} FINAL").result_rows
    return {int(version): str(checksum) for version, checksum in rows}


def migrate(client: Client, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[Migration]:
    """Apply the migrations not applied yet, in version order; return them. Raises MigrationDrift on edited history."""
    done = applied(client)
    for migration in migrations:
        if migration.version in done and done[migration.version] != migration.checksum:
            raise MigrationDrift(
                f"migration {migration.version} ({migration.name}) was applied with a different text; "
                "released migrations must not change: add a new one"
            )
    pending = sorted((m for m in migrations if m.version not in done), key=lambda m: m.version)
    for migration in pending:
        for statement in migration.statements:
            client.command(statement)
        client.insert(
            MIGRATIONS_TABLE,
            [[migration.version, migration.name, migration.checksum, datetime.now(UTC)]],
            column_names=["version", "name", "checksum", "applied_at"],
        )
    return pending
