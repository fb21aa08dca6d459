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

from core.handoff import FACTS_ONLY_MARK

MIGRATIONS_TABLE = "schema_migrations"
FACTS_ONLY = f"'{FACTS_ONLY_MARK}'"
"""The relay's mark that starts a facts-only package's summary, as the SQL literal the views of migration 10 match
(the mark holds no quote or backslash to escape)."""


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
    # Latest state, one row per key once merged; readers use FINAL. `version` is the source record's Kafka offset
    # (sinks/tables.py says why). The dedup window lets a retried batch's token drop it here too.
    Migration(
        2,
        "latest-state tables: threads, alerts, handoff packages, conversations, project risk, policies",
        (
            """
            CREATE TABLE IF NOT EXISTS thread_context_latest
            (
                thread_id String,
                project_id LowCardinality(String),
                task_id Nullable(String),
                node_id LowCardinality(String),
                worker_id LowCardinality(String),
                source_kind LowCardinality(String),
                snapshot_id String,
                snapshot_version UInt64,
                captured_at DateTime64(3, 'UTC'),
                context_budget_remaining_pct Float32,
                context_budget_level LowCardinality(String),
                reported_level LowCardinality(String),
                compaction_expected_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_earliest_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_latest_at Nullable(DateTime64(3, 'UTC')),
                estimated_remaining_turns Nullable(UInt32),
                estimated_remaining_large_messages Nullable(UInt32),
                last_compaction_at Nullable(DateTime64(3, 'UTC')),
                last_compaction_trigger_mode LowCardinality(Nullable(String)),
                compaction_count UInt32,
                must_finish_before_compaction Bool,
                worker_must_finish Bool,
                active_work_facts Array(LowCardinality(String)),
                next_required_report_in_seconds UInt32,
                report_deadline_at DateTime64(3, 'UTC'),
                stale Bool,
                compaction_risk_open Bool,
                critical_since Nullable(DateTime64(3, 'UTC')),
                open_alert_ids Array(String),
                handoff_package_id Nullable(String),
                handoff_package_status LowCardinality(Nullable(String)),
                due_actions Array(LowCardinality(String)),
                wrap_up_requested Bool,
                compaction_unprepared Bool,
                level_mismatches UInt32,
                projected_tokens Nullable(UInt32),
                sampled_tokens Nullable(UInt32),
                sampled_at Nullable(DateTime64(3, 'UTC')),
                context_window_tokens Nullable(UInt32),
                latest_manifest String DEFAULT '' CODEC(ZSTD),
                updated_at DateTime64(3, 'UTC'),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY thread_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS thread_context_alerts
            (
                alert_id String,
                thread_id String,
                project_id LowCardinality(String),
                alert_type LowCardinality(String),
                alert_status LowCardinality(String),
                opened_at DateTime64(3, 'UTC'),
                acked_at Nullable(DateTime64(3, 'UTC')),
                resolved_at Nullable(DateTime64(3, 'UTC')),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY alert_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS thread_handoff_packages
            (
                handoff_package_id String,
                project_id LowCardinality(String),
                task_id Nullable(String),
                from_thread_id String,
                to_thread_id Nullable(String),
                package_status LowCardinality(String),
                summary_text String CODEC(ZSTD),
                open_questions Array(String),
                critical_files Array(String),
                critical_commands Array(String),
                critical_tests Array(String),
                critical_artifacts Array(String),
                decision_links Array(String),
                created_at DateTime64(3, 'UTC'),
                ready_at Nullable(DateTime64(3, 'UTC')),
                consumed_at Nullable(DateTime64(3, 'UTC')),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY handoff_package_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS conversation_indicators
            (
                conversation_id String,
                conversation_type LowCardinality(String),
                project_id LowCardinality(String),
                project_title String,
                manual_pinned Bool,
                latest_reply_at Nullable(DateTime64(3, 'UTC')),
                indicator_visible Bool,
                indicator_percent Nullable(UInt8),
                indicator_level LowCardinality(Nullable(String)),
                context_budget_source_node_id LowCardinality(Nullable(String)),
                context_budget_updated_at Nullable(DateTime64(3, 'UTC')),
                must_finish_before_compaction Bool,
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY conversation_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS project_context_risk
            (
                project_id String,
                active_thread_count UInt32,
                active_thread_contexts String CODEC(ZSTD),
                next_compaction_risk_thread_id Nullable(String),
                threads_requiring_handoff Array(String),
                master_context_strategy_summary String CODEC(ZSTD),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY project_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS thread_context_threshold_policies
            (
                project_id String,
                safe_min_pct Float32,
                watch_min_pct Float32,
                urgent_min_pct Float32,
                updated_at Nullable(DateTime64(3, 'UTC')),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY project_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
        ),
    ),
    # History, partitioned by month and ordered for per-project / per-thread timelines. Retention is not part of the
    # DDL (it is a setting; `apply_history_ttl`), so changing it never edits a released migration.
    Migration(
        3,
        "history tables: context events, alert transitions, compactions, master actions; sink batch plans",
        (
            """
            CREATE TABLE IF NOT EXISTS context_events
            (
                event_id String,
                event_type LowCardinality(String),
                project_id LowCardinality(String),
                thread_id String,
                conversation_id Nullable(String),
                occurred_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD),
                context_budget_remaining_pct Nullable(Float32),
                context_budget_level LowCardinality(Nullable(String)),
                previous_level LowCardinality(Nullable(String)),
                snapshot_id Nullable(String),
                reason String,
                payload String CODEC(ZSTD)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(occurred_at)
            ORDER BY (project_id, thread_id, occurred_at, event_id)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS alert_transitions
            (
                alert_id String,
                thread_id String,
                project_id LowCardinality(String),
                alert_type LowCardinality(String),
                alert_status LowCardinality(String),
                opened_at DateTime64(3, 'UTC'),
                acked_at Nullable(DateTime64(3, 'UTC')),
                resolved_at Nullable(DateTime64(3, 'UTC')),
                transitioned_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(transitioned_at)
            ORDER BY (project_id, thread_id, alert_id, transitioned_at)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS compaction_events
            (
                event_id String,
                thread_id String,
                project_id LowCardinality(String),
                trigger_mode LowCardinality(String),
                model LowCardinality(Nullable(String)),
                started_at Nullable(DateTime64(3, 'UTC')),
                completed_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD),
                tokens_before Nullable(UInt32),
                tokens_after Nullable(UInt32),
                summary_token_count Nullable(UInt32),
                handoff_ready Bool
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(completed_at)
            ORDER BY (project_id, thread_id, completed_at, event_id)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE TABLE IF NOT EXISTS master_actions
            (
                action_id String,
                thread_id String,
                project_id LowCardinality(String),
                context_budget_level LowCardinality(String),
                actions Array(LowCardinality(String)),
                reason String,
                issued_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD),
                checklist String CODEC(ZSTD)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(issued_at)
            ORDER BY (project_id, thread_id, issued_at, action_id)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            # The sinks' offset ranges, recorded before each insert so a restarted sink cuts the same batches (and
            # tokens). Needed only until the offsets are committed; a week covers any outage worth replaying.
            """
            CREATE TABLE IF NOT EXISTS sink_batches
            (
                topic LowCardinality(String),
                partition UInt32,
                first_offset UInt64,
                last_offset UInt64,
                planned_at DateTime64(3, 'UTC')
            )
            ENGINE = ReplacingMergeTree
            ORDER BY (topic, partition, first_offset)
            TTL toDateTime(planned_at) + INTERVAL 7 DAY
            SETTINGS non_replicated_deduplication_window = 1000
            """,
        ),
    ),
    Migration(
        4,
        "conversation indicators keep the stale mark (a stale thread's ring shows its last value, marked)",
        ("ALTER TABLE conversation_indicators ADD COLUMN IF NOT EXISTS indicator_stale Bool DEFAULT false",),
    ),
    Migration(
        5,
        "thread_context_projection: projected and sampled tokens, window, forecast band, latest manifest",
        (
            """
            CREATE TABLE IF NOT EXISTS thread_context_projection
            (
                thread_id String,
                project_id LowCardinality(Nullable(String)),
                projected_tokens UInt32,
                sampled_tokens Nullable(UInt32),
                sampled_at Nullable(DateTime64(3, 'UTC')),
                surface_tokens UInt32,
                context_window_tokens UInt32,
                heuristic Bool,
                compaction_expected_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_earliest_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_latest_at Nullable(DateTime64(3, 'UTC')),
                last_compaction_trigger_mode LowCardinality(Nullable(String)),
                truncated_tool_results UInt32,
                latest_manifest String CODEC(ZSTD),
                updated_at DateTime64(3, 'UTC'),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY thread_id
            SETTINGS non_replicated_deduplication_window = 1000
            """,
        ),
    ),
    Migration(
        6,
        "analytics: projection history, compactions by model profile, and the analysts' views",
        (
            # Every published projection of a thread: its forecast over time, and the running totals (truncated tool
            # results, estimator error) that the daily views difference.
            """
            CREATE TABLE IF NOT EXISTS thread_projection_history
            (
                thread_id String,
                project_id LowCardinality(Nullable(String)),
                projected_tokens UInt32,
                sampled_tokens Nullable(UInt32),
                surface_tokens UInt32,
                context_window_tokens UInt32,
                heuristic Bool,
                estimated_remaining_turns Nullable(UInt32),
                estimated_remaining_large_messages Nullable(UInt32),
                compaction_expected_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_earliest_at Nullable(DateTime64(3, 'UTC')),
                compaction_expected_latest_at Nullable(DateTime64(3, 'UTC')),
                truncated_tool_results UInt32,
                estimate_checks UInt32,
                estimate_abs_error_tokens UInt64,
                estimate_signed_error_tokens Int64,
                estimate_sampled_tokens UInt64,
                updated_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(updated_at)
            ORDER BY (thread_id, updated_at)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            "ALTER TABLE compaction_events ADD COLUMN IF NOT EXISTS model_profile LowCardinality(Nullable(String))",
            # The views read history at least once per id: folds publish at least once, so a replayed output can
            # repeat a row (the same id) that the sinks' tokens cannot tell from a new one. `LIMIT 1 BY id` drops it.
            #
            # Seconds per engine level, per thread and UTC day. Each `thread.context.updated` event holds its level
            # until the thread's next one; the interval counts on the day it started, and a thread's newest event
            # (still open) counts only once a later one closes it.
            """
            CREATE VIEW IF NOT EXISTS analytics_level_time AS
            SELECT toDate(occurred_at) AS day, project_id, thread_id, assumeNotNull(context_budget_level) AS level,
                   sum(dateDiff('millisecond', occurred_at, next_at)) / 1000 AS seconds
            FROM
            (
                SELECT project_id, thread_id, occurred_at, context_budget_level,
                       leadInFrame(occurred_at) OVER following AS next_at,
                       count() OVER following AS closed
                FROM (SELECT * FROM context_events WHERE event_type = 'thread.context.updated' LIMIT 1 BY event_id)
                WINDOW following AS (
                    PARTITION BY thread_id ORDER BY occurred_at, event_id ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING
                )
            )
            WHERE closed = 2
            GROUP BY day, project_id, thread_id, level
            """,
            # Compactions per UTC day by trigger mode and model profile, and how many had a ready handoff package
            # when they started (spec 9.5: the share should be 1).
            """
            CREATE VIEW IF NOT EXISTS analytics_compactions_daily AS
            SELECT toDate(completed_at) AS day, project_id, trigger_mode,
                   ifNull(model_profile, 'unknown') AS model_profile,
                   count() AS compactions,
                   countIf(handoff_ready) AS with_ready_handoff,
                   with_ready_handoff / compactions AS ready_handoff_share
            FROM (SELECT * FROM compaction_events LIMIT 1 BY event_id)
            GROUP BY day, project_id, trigger_mode, model_profile
            """,
            # Per package that became ready: how long after its thread entered urgent (or critical) from a healthier
            # level. NULL when the thread was not urgent at the time: the package was ready first, the best case.
            """
            CREATE VIEW IF NOT EXISTS analytics_urgent_to_handoff_ready AS
            SELECT p.handoff_package_id AS handoff_package_id, p.project_id AS project_id,
                   p.from_thread_id AS thread_id, p.ready_at AS ready_at,
                   if(c.entered, c.occurred_at, NULL) AS urgent_at,
                   dateDiff('millisecond', urgent_at, ready_at) / 1000 AS seconds_from_urgent
            FROM
            (
                SELECT handoff_package_id, project_id, from_thread_id, assumeNotNull(ready_at) AS ready_at
                FROM thread_handoff_packages FINAL
                WHERE ready_at IS NOT NULL
            ) AS p
            ASOF LEFT JOIN
            (
                SELECT thread_id, occurred_at, context_budget_level IN ('urgent', 'critical') AS entered
                FROM
                (
                    SELECT * FROM context_events WHERE event_type = 'thread.context.level_changed' LIMIT 1 BY event_id
                )
                WHERE (context_budget_level IN ('urgent', 'critical')) != (previous_level IN ('urgent', 'critical'))
            ) AS c
            ON p.from_thread_id = c.thread_id AND p.ready_at >= c.occurred_at
            """,
            # Per alert: seconds from opening to acknowledgement and to resolution (NULL while not yet there).
            """
            CREATE VIEW IF NOT EXISTS analytics_alert_response AS
            SELECT alert_id, project_id, thread_id, alert_type, alert_status, opened_at, acked_at, resolved_at,
                   dateDiff('millisecond', opened_at, acked_at) / 1000 AS seconds_to_ack,
                   dateDiff('millisecond', opened_at, resolved_at) / 1000 AS seconds_to_resolve
            FROM thread_context_alerts FINAL
            """,
            # Per thread and UTC day, from the projection's running totals (the day's last value minus the day
            # before's): truncated tool results, and the estimator's error against each next provider sample. Totals
            # restart from 0 only when a state of an older fold version is restored (`reset`): that day counts whole.
            """
            CREATE VIEW IF NOT EXISTS analytics_projection_daily AS
            SELECT day, project_id, thread_id,
                   if(truncated < lagInFrame(truncated, 1, 0) OVER previous,
                      truncated, truncated - lagInFrame(truncated, 1, 0) OVER previous) AS truncated_tool_results,
                   checks < lagInFrame(checks, 1, 0) OVER previous AS reset,
                   if(reset, checks, checks - lagInFrame(checks, 1, 0) OVER previous) AS estimate_checks,
                   if(reset, abs_error, abs_error - lagInFrame(abs_error, 1, 0) OVER previous) AS abs_error_tokens,
                   if(reset, signed_error, signed_error - lagInFrame(signed_error, 1, 0) OVER previous)
                       AS signed_error_tokens,
                   if(reset, sampled, sampled - lagInFrame(sampled, 1, 0) OVER previous) AS sampled_tokens,
                   if(estimate_checks > 0, abs_error_tokens / estimate_checks, NULL) AS mean_abs_error_tokens,
                   if(estimate_checks > 0, signed_error_tokens / estimate_checks, NULL) AS mean_signed_error_tokens,
                   if(sampled_tokens > 0, abs_error_tokens / sampled_tokens, NULL) AS relative_abs_error
            FROM
            (
                SELECT toDate(updated_at) AS day, thread_id, argMax(project_id, updated_at) AS project_id,
                       argMax(truncated_tool_results, updated_at) AS truncated,
                       argMax(estimate_checks, updated_at) AS checks,
                       argMax(estimate_abs_error_tokens, updated_at) AS abs_error,
                       argMax(estimate_signed_error_tokens, updated_at) AS signed_error,
                       argMax(estimate_sampled_tokens, updated_at) AS sampled
                FROM thread_projection_history
                GROUP BY thread_id, day
            )
            WINDOW previous AS (PARTITION BY thread_id ORDER BY day ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
            """,
            # Per forecast a worker sent itself (issue 6): its compaction time against the engine's projection of
            # the same thread as it stood when the snapshot was captured.
            """
            CREATE VIEW IF NOT EXISTS analytics_forecast_comparison AS
            SELECT s.project_id AS project_id, s.thread_id AS thread_id, s.snapshot_id AS snapshot_id,
                   s.source_kind AS source_kind, s.captured_at AS captured_at,
                   s.compaction_expected_at AS worker_expected_at,
                   p.compaction_expected_at AS engine_expected_at,
                   p.compaction_expected_earliest_at AS engine_earliest_at,
                   p.compaction_expected_latest_at AS engine_latest_at,
                   dateDiff('millisecond', engine_expected_at, worker_expected_at) / 1000
                       AS worker_minus_engine_seconds,
                   worker_expected_at BETWEEN engine_earliest_at AND engine_latest_at AS within_engine_band,
                   s.estimated_remaining_turns AS worker_remaining_turns,
                   p.estimated_remaining_turns AS engine_remaining_turns
            FROM
            (
                SELECT *
                FROM thread_context_snapshots
                WHERE source_kind != 'worker_estimator' AND compaction_expected_at IS NOT NULL
                LIMIT 1 BY snapshot_id
            ) AS s
            ASOF JOIN thread_projection_history AS p ON s.thread_id = p.thread_id AND s.captured_at >= p.updated_at
            """,
        ),
    ),
    Migration(
        7,
        "exact percents; wrap-up requests beside ready packages; package verdicts; checklist; snapshot input log",
        (
            # Float32 rounded 59.999999 up to 60: the thread page then disagreed with the ring and the project view
            # (spec 9.6). Float64 holds every Percent the contract admits exactly as sent.
            "ALTER TABLE thread_context_latest MODIFY COLUMN context_budget_remaining_pct Float64",
            "ALTER TABLE thread_context_snapshots MODIFY COLUMN context_budget_remaining_pct Float64",
            "ALTER TABLE context_events MODIFY COLUMN context_budget_remaining_pct Nullable(Float64)",
            # Spec 9.5 asks both: was a wrap-up triggered before the compaction, and was a package ready (what saved
            # the work). A request alone is not a wrap-up.
            "ALTER TABLE compaction_events ADD COLUMN IF NOT EXISTS wrap_up_requested Bool DEFAULT false",
            # The engine's verdict on the latest package it did not take as claimed (demoted or rejected).
            "ALTER TABLE thread_context_latest ADD COLUMN IF NOT EXISTS handoff_decision_package_id Nullable(String)",
            "ALTER TABLE thread_context_latest ADD COLUMN IF NOT EXISTS handoff_decision_reason String DEFAULT ''",
            # The thread's current checklist (spec 6.3), as the engine keeps it: the newest master action's copy went
            # blank with compact_now and missed every change of facts that did not move the level.
            "ALTER TABLE thread_context_latest ADD COLUMN IF NOT EXISTS wrap_up_checklist String DEFAULT ''",
            # Every snapshot the engine read and its verdict; thread_context_snapshots keeps the accepted ones.
            """
            CREATE TABLE IF NOT EXISTS thread_context_snapshot_inputs
            (
                snapshot_id String,
                project_id LowCardinality(String),
                thread_id String,
                source_kind LowCardinality(String),
                context_budget_remaining_pct Float64,
                context_budget_level LowCardinality(String),
                snapshot_version UInt64,
                captured_at DateTime64(3, 'UTC') CODEC(Delta, ZSTD),
                accepted Bool,
                verdict LowCardinality(String)
            )
            ENGINE = MergeTree
            PARTITION BY toYYYYMM(captured_at)
            ORDER BY (project_id, thread_id, captured_at, snapshot_id)
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            CREATE OR REPLACE VIEW analytics_compactions_daily AS
            SELECT toDate(completed_at) AS day, project_id, trigger_mode,
                   ifNull(model_profile, 'unknown') AS model_profile,
                   count() AS compactions,
                   countIf(handoff_ready) AS with_ready_handoff,
                   with_ready_handoff / compactions AS ready_handoff_share,
                   countIf(wrap_up_requested) AS with_wrap_up_requested,
                   with_wrap_up_requested / compactions AS wrap_up_requested_share
            FROM (SELECT * FROM compaction_events LIMIT 1 BY event_id)
            GROUP BY day, project_id, trigger_mode, model_profile
            """,
        ),
    ),
    Migration(
        8,
        "master actions with a lifecycle (a row per state), threads' current actions, projects' subtask targets",
        (
            """
            ALTER TABLE master_actions
                ADD COLUMN IF NOT EXISTS state LowCardinality(String) DEFAULT 'issued',
                ADD COLUMN IF NOT EXISTS state_changed_at DateTime64(3, 'UTC') DEFAULT issued_at,
                ADD COLUMN IF NOT EXISTS changed_by String DEFAULT '',
                ADD COLUMN IF NOT EXISTS state_reason String DEFAULT ''
            """,
            # The cycle's actions as the engine holds them (JSON items with id and state), for the open ones of 6.3.
            "ALTER TABLE thread_context_latest ADD COLUMN IF NOT EXISTS master_action_items String DEFAULT '[]'",
            # spec 8.2 point 4 beside spec 6.2's fields: where new subtasks should go
            "ALTER TABLE project_context_risk ADD COLUMN IF NOT EXISTS new_subtask_thread_ids Array(String) DEFAULT []",
            # How long each action waited: issued, first acknowledged, finished (done or superseded), and how.
            """
            CREATE VIEW IF NOT EXISTS analytics_master_action_waits AS
            SELECT action_id, any(project_id) AS project_id, any(thread_id) AS thread_id,
                   any(actions[1]) AS action, any(context_budget_level) AS context_budget_level,
                   min(issued_at) AS issued_at,
                   minIf(toNullable(state_changed_at), state = 'acknowledged') AS acknowledged_at,
                   minIf(toNullable(state_changed_at), state IN ('done', 'superseded')) AS finished_at,
                   argMaxIf(state, state_changed_at, state IN ('done', 'superseded')) AS finished_as,
                   dateDiff('millisecond', issued_at, finished_at) / 1000 AS wait_seconds
            FROM master_actions
            GROUP BY action_id
            """,
        ),
    ),
    Migration(
        9,
        "snapshots keep the agent tool, the model and the percent the tool itself shows (additive report fields)",
        (
            """
            ALTER TABLE thread_context_snapshots
                ADD COLUMN IF NOT EXISTS agent_tool Nullable(String),
                ADD COLUMN IF NOT EXISTS model Nullable(String),
                ADD COLUMN IF NOT EXISTS shown_remaining_pct Nullable(Float64)
            """,
        ),
    ),
    Migration(
        10,
        "relay analytics: threads' tool, model and time; the relay per project, tool, model and day; levels; timeline",
        (
            # Per thread: the agent tool and model of its newest report that names them (the reporter sends both);
            # the model of its newest compaction otherwise. 'unknown' when nothing named them.
            """
            CREATE VIEW IF NOT EXISTS analytics_thread_tools AS
            SELECT thread_id, any(project_id) AS project_id,
                   ifNull(argMaxIf(agent_tool, at, agent_tool IS NOT NULL), 'unknown') AS agent_tool,
                   ifNull(argMaxIf(model, at, model IS NOT NULL AND from_report),
                          ifNull(argMaxIf(model, at, model IS NOT NULL), 'unknown')) AS model
            FROM
            (
                SELECT thread_id, project_id, agent_tool, model, captured_at AS at, true AS from_report
                FROM thread_context_snapshots
                UNION ALL
                SELECT thread_id, project_id, NULL, model, completed_at, false FROM compaction_events
            )
            GROUP BY thread_id
            """,
            # Seconds per level, per thread and UTC day, as analytics_level_time counts them but for a thread that went
            # stale: from the engine's `stale` update to the thread's next one it counts as `stale`, not at its last
            # level (analytics_level_time counts a silent night as hours at that level). Thread-hours leave it out.
            """
            CREATE VIEW IF NOT EXISTS analytics_thread_time AS
            SELECT toDate(occurred_at) AS day, project_id, thread_id,
                   if(reason = 'stale', 'stale', assumeNotNull(context_budget_level)) AS level,
                   sum(dateDiff('millisecond', occurred_at, next_at)) / 1000 AS seconds
            FROM
            (
                SELECT project_id, thread_id, occurred_at, context_budget_level, reason,
                       leadInFrame(occurred_at) OVER following AS next_at,
                       count() OVER following AS closed
                FROM (SELECT * FROM context_events WHERE event_type = 'thread.context.updated' LIMIT 1 BY event_id)
                WINDOW following AS (
                    PARTITION BY thread_id ORDER BY occurred_at, event_id ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING
                )
            )
            WHERE closed = 2
            GROUP BY day, project_id, thread_id, level
            """,
            # Per UTC day, project, agent tool and model: how the relay did (spec 9.5, issue 37). Each fact counts on
            # the day it happened: a compaction when it began, with the thread's newest package ready by then (its
            # summary tells the agent's own part from a facts-only one, which starts with the relay's mark,
            # core.handoff.FACTS_ONLY_MARK); a package when it was ready (else created); a handoff_missing
            # alert when it opened; a prepare_handoff when it was issued, with its wait until the engine marked it
            # done because a package got ready (the waits view's finished_at takes any done); thread-hours: the time
            # threads reported (analytics_thread_time but stale). Percentiles by the nearest rank below, as
            # bench.measure.percentile.
            f"""
            CREATE VIEW IF NOT EXISTS analytics_relay_daily AS
            SELECT f.day AS day, f.project_id AS project_id,
                   if(empty(t.agent_tool), 'unknown', t.agent_tool) AS agent_tool,
                   if(empty(t.model), 'unknown', t.model) AS model,
                   sum(f.compaction) AS compactions,
                   sum(f.ready) AS with_ready_package,
                   if(compactions > 0, with_ready_package / compactions, NULL) AS ready_package_share,
                   sum(f.agent_part) AS with_agent_part,
                   if(compactions > 0, with_agent_part / compactions, NULL) AS agent_part_share,
                   sum(f.package) AS packages,
                   sum(f.facts_only) AS facts_only_packages,
                   sum(f.handoff_missing) AS handoff_missing,
                   sum(f.issued) AS prepare_handoff_issued,
                   arraySort(groupArrayIf(f.wait, f.readied)) AS ready_waits,
                   length(ready_waits) AS prepare_handoff_readied,
                   if(empty(ready_waits), NULL, ready_waits[toUInt32(floor(0.5 * (length(ready_waits) - 1))) + 1])
                       AS ready_p50_seconds,
                   if(empty(ready_waits), NULL, ready_waits[toUInt32(floor(0.99 * (length(ready_waits) - 1))) + 1])
                       AS ready_p99_seconds,
                   sum(f.seconds) / 3600 AS thread_hours,
                   if(thread_hours > 0, compactions / thread_hours, NULL) AS compactions_per_thread_hour
            FROM
            (
                SELECT toDate(c.began_at) AS day, c.project_id AS project_id, c.thread_id AS thread_id,
                       1 AS compaction, toUInt8(c.handoff_ready) AS ready,
                       toUInt8(c.handoff_ready AND NOT empty(p.summary_text)
                               AND NOT startsWith(p.summary_text, {FACTS_ONLY}))
                           AS agent_part,
                       0 AS package, 0 AS facts_only, 0 AS handoff_missing, 0 AS issued, false AS readied,
                       0.0 AS wait, 0.0 AS seconds
                FROM
                (
                    SELECT *, assumeNotNull(coalesce(started_at, completed_at)) AS began_at
                    FROM compaction_events LIMIT 1 BY event_id
                ) AS c
                ASOF LEFT JOIN
                (
                    SELECT from_thread_id, assumeNotNull(ready_at) AS ready_at, summary_text
                    FROM thread_handoff_packages FINAL
                    WHERE ready_at IS NOT NULL
                ) AS p
                ON c.thread_id = p.from_thread_id AND c.began_at >= p.ready_at
                UNION ALL
                SELECT toDate(coalesce(ready_at, created_at)), project_id, from_thread_id, 0, 0, 0, 1,
                       startsWith(summary_text, {FACTS_ONLY}),
                       0, 0, false, 0.0, 0.0
                FROM thread_handoff_packages FINAL
                UNION ALL
                SELECT toDate(opened_at), project_id, thread_id, 0, 0, 0, 0, 0, 1, 0, false, 0.0, 0.0
                FROM thread_context_alerts FINAL
                WHERE alert_type = 'handoff_missing'
                UNION ALL
                SELECT toDate(issued), project_id, thread_id, 0, 0, 0, 0, 0, 0, 1, readied_at IS NOT NULL,
                       ifNull(dateDiff('millisecond', issued, readied_at) / 1000, 0.0), 0.0
                FROM
                (
                    SELECT action_id, any(project_id) AS project_id, any(thread_id) AS thread_id,
                           min(issued_at) AS issued,
                           minIf(toNullable(state_changed_at), state = 'done' AND state_reason = 'handoff_ready')
                               AS readied_at
                    FROM master_actions
                    WHERE has(actions, 'prepare_handoff')
                    GROUP BY action_id
                )
                UNION ALL
                SELECT day, project_id, thread_id, 0, 0, 0, 0, 0, 0, 0, false, 0.0, seconds
                FROM analytics_thread_time
                WHERE level != 'stale'
            ) AS f
            LEFT JOIN analytics_thread_tools AS t ON f.thread_id = t.thread_id
            GROUP BY day, project_id, agent_tool, model
            """,
            # Hours of thread time per engine level (and `stale`), per UTC day, project, agent tool and model: the
            # fleet's levels over time (analytics_thread_time by the thread's tool).
            """
            CREATE VIEW IF NOT EXISTS analytics_levels_daily AS
            SELECT l.day AS day, l.project_id AS project_id,
                   if(empty(t.agent_tool), 'unknown', t.agent_tool) AS agent_tool,
                   if(empty(t.model), 'unknown', t.model) AS model,
                   l.level AS level, sum(l.seconds) / 3600 AS thread_hours
            FROM analytics_thread_time AS l
            LEFT JOIN analytics_thread_tools AS t ON l.thread_id = t.thread_id
            GROUP BY day, project_id, agent_tool, model, level
            """,
            # One thread's history to plot: its budget as the engine saw it (`budget`), and the marks on it:
            # compactions when they began (`compaction`, label the trigger mode, detail ready / no package), every
            # state of a master action (`master_action`, label the action, detail the state), and each package once
            # ready, else when created (`package`, label its status, detail facts_only / agent / empty).
            f"""
            CREATE VIEW IF NOT EXISTS analytics_thread_timeline AS
            SELECT project_id, thread_id, occurred_at AS at, 'budget' AS kind, event_id AS ref,
                   context_budget_remaining_pct AS remaining_pct, context_budget_level AS label, '' AS detail
            FROM (SELECT * FROM context_events WHERE event_type = 'thread.context.updated' LIMIT 1 BY event_id)
            UNION ALL
            SELECT project_id, thread_id, coalesce(started_at, completed_at), 'compaction', event_id, NULL,
                   trigger_mode, if(handoff_ready, 'ready', 'no package')
            FROM (SELECT * FROM compaction_events LIMIT 1 BY event_id)
            UNION ALL
            SELECT project_id, thread_id, state_changed_at, 'master_action', action_id, NULL, actions[1], state
            FROM (SELECT * FROM master_actions LIMIT 1 BY action_id, state)
            UNION ALL
            SELECT project_id, from_thread_id, coalesce(ready_at, created_at), 'package', handoff_package_id, NULL,
                   package_status,
                   multiIf(empty(summary_text), 'empty',
                           startsWith(summary_text, {FACTS_ONLY}),
                           'facts_only', 'agent')
            FROM thread_handoff_packages FINAL
            """,
        ),
    ),
    Migration(
        11,
        "the fleet's learned compaction points with their evidence; compactions and snapshots keep their tokens, window"
        " and tool version, projections their point and its key (additive fields)",
        (
            """
            CREATE TABLE IF NOT EXISTS compaction_points
            (
                point_key String,
                agent_tool LowCardinality(String),
                tool_version LowCardinality(String),
                model LowCardinality(String),
                context_window_tokens UInt32,
                default_point_tokens UInt32,
                compaction_point_tokens Nullable(UInt32),
                band_low_tokens Nullable(UInt32),
                band_high_tokens Nullable(UInt32),
                sample_tokens Array(UInt32),
                compactions UInt32,
                since Nullable(DateTime64(3, 'UTC')),
                previous_point_tokens Nullable(UInt32),
                moved_at Nullable(DateTime64(3, 'UTC')),
                moves UInt32,
                project_ids Array(String),
                updated_at DateTime64(3, 'UTC'),
                version UInt64
            )
            ENGINE = ReplacingMergeTree(version)
            ORDER BY point_key
            SETTINGS non_replicated_deduplication_window = 1000
            """,
            """
            ALTER TABLE compaction_events
                ADD COLUMN IF NOT EXISTS context_window_tokens Nullable(UInt32),
                ADD COLUMN IF NOT EXISTS tool_version Nullable(String)
            """,
            """
            ALTER TABLE thread_context_snapshots
                ADD COLUMN IF NOT EXISTS context_tokens Nullable(UInt32),
                ADD COLUMN IF NOT EXISTS context_window_tokens Nullable(UInt32),
                ADD COLUMN IF NOT EXISTS tool_version Nullable(String)
            """,
            """
            ALTER TABLE thread_context_projection
                ADD COLUMN IF NOT EXISTS compaction_point_key Nullable(String),
                ADD COLUMN IF NOT EXISTS compaction_point_tokens Nullable(UInt32)
            """,
            """
            ALTER TABLE thread_projection_history
                ADD COLUMN IF NOT EXISTS compaction_point_key Nullable(String),
                ADD COLUMN IF NOT EXISTS compaction_point_tokens Nullable(UInt32)
            """,
        ),
    ),
)

HISTORY_TIME_COLUMNS: dict[str, str] = {
    "thread_context_snapshots": "captured_at",
    "thread_context_snapshot_inputs": "captured_at",
    "context_events": "occurred_at",
    "alert_transitions": "transitioned_at",
    "compaction_events": "completed_at",
    "master_actions": "issued_at",
    "deadletter": "received_at",
    "thread_projection_history": "updated_at",
}
"""History tables and the time column they are partitioned and expired by."""
DEFAULT_HISTORY_TTL_DAYS = 365


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


def apply_history_ttl(client: Client, days: int | None = DEFAULT_HISTORY_TTL_DAYS) -> list[str]:
    """Expire history rows older than `days` (None keeps them forever); return the tables whose TTL changed.

    Only a table whose TTL differs is altered: a changed TTL rewrites TTL info of every part, so this stays a no-op on
    every start with an unchanged setting.
    """
    changed = []
    for table, column in HISTORY_TIME_COLUMNS.items():
        current = _ttl_clause(client, table)
        wanted = None if days is None else f"toDateTime({column}) + toIntervalDay({days})"
        if current == wanted:
            continue
        if wanted is None:
            client.command(f"ALTER TABLE {table} REMOVE TTL")
        else:
            client.command(f"ALTER TABLE {table} MODIFY TTL toDateTime({column}) + INTERVAL {int(days)} DAY")
        changed.append(table)
    return changed


def _ttl_clause(client: Client, table: str) -> str | None:
    """The table's TTL expression as ClickHouse normalised it, or None."""
    engine_full = client.query(
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": table},
    ).result_rows[0][0]
    _, found, rest = engine_full.partition(" TTL ")
    return rest.partition(" SETTINGS ")[0].strip() if found else None
