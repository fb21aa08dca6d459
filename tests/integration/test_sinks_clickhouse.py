"""The sinks on ClickHouse (embedded chdb unless a DSN is configured): tables, effectively-once inserts, FINAL reads."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import OperationalError

from core.engine_config import EngineConfig
from core.settings import Settings
from core.topics import SNAPSHOTS
from schemas import AlertStatus, Record
from schemas.codec import encode_record
from sinks import queries
from sinks.batcher import Batcher, Flush
from sinks.migrations import HISTORY_TIME_COLUMNS, MIGRATIONS, applied, apply_history_ttl, migrate
from sinks.rows import TableSpec
from sinks.tables import (
    ALERT_TRANSITIONS,
    ROUTES,
    TABLES,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_LATEST,
    THREAD_CONTEXT_SNAPSHOT_INPUTS,
    THREAD_CONTEXT_SNAPSHOTS,
    THRESHOLD_POLICIES,
)
from sinks.writer import Backoff, planned_ranges, record_plan, write_batch, write_flush
from streams.batching import InputMessage
from streams.engine.batch import process_batch
from streams.runtime.memory import MemoryRuntime
from streams.topology import wire
from tests.unit.engine.builders import at, snapshot
from tests.unit.sinks.records import (
    compaction,
    compaction_point,
    conversation,
    dead_letter,
    engine_outputs,
    policy,
    project_detail,
    projection,
)

pytestmark = pytest.mark.clickhouse

NO_WAIT = Backoff(first_seconds=0.0, attempts=5)


@pytest.fixture
def db(clickhouse) -> Any:
    migrate(clickhouse)
    return clickhouse


def scenario() -> tuple[str, dict[str, list[Record]]]:
    """Every routed topic's records for a fresh thread, project and conversation (the session database is shared)."""
    tag = uuid.uuid4().hex[:8]
    thread, project = f"thread-{tag}", f"proj-{tag}"
    records: dict[str, list[Record]] = dict(engine_outputs(thread, project))
    records["conversation-indicators"] = [conversation(f"conv-{tag}")]
    records["project-risk"] = [project_detail(project)]
    records["policies"] = [policy(project)]
    records["compactions"] = [compaction(thread, project)]
    records["thread-projections"] = [projection(thread, project)]
    records["compaction-points"] = [compaction_point(f"gpt-5-codex-{tag}", project)]
    records["deadletter"] = [dead_letter(f"ctx.snapshots-{tag}")]
    records["snapshot-verdicts"] = engine_verdicts(thread, project)
    return tag, records


def engine_verdicts(thread: str, project: str) -> list[Record]:
    """The engine's verdicts on v5, the same v5 again, v7, then a stale v5 at another percent (issue 19.7)."""
    inputs = [
        snapshot(50, thread=thread, project=project, version=5, seconds=5),
        snapshot(50, thread=thread, project=project, version=5, seconds=5),
        snapshot(40, thread=thread, project=project, version=7, seconds=7),
        snapshot(70, thread=thread, project=project, version=5, seconds=5),
    ]
    messages = [
        InputMessage(SNAPSHOTS, 0, offset, thread.encode(), encode_record(s)) for offset, s in enumerate(inputs)
    ]
    result = process_batch(messages, {}.get, {}.get, at(10), EngineConfig(), "ctx.")
    return [e.record for e in result.emits if e.topic == "snapshot-verdicts"]


def flushes(tag: str, records: dict[str, list[Record]], partition: int = 0) -> list[Flush]:
    """One flush per topic, as a sink would cut it, with offsets 0..n-1."""
    out = []
    for topic, values in records.items():
        batcher = Batcher(ROUTES[topic], f"t{tag}.{topic}", partition)
        for offset, value in enumerate(values):
            out += batcher.add(offset, value)
        out += batcher.flush()
    return out


def stored(client: Any, table: TableSpec, of: list[Flush]) -> list[tuple[Any, ...]]:
    """The rows of `table` whose key (a column unique to the scenario) the given flushes wrote, in a stable order.

    Latest-state tables are read with FINAL: one row per key.
    """
    key = "source_topic" if table.name == "deadletter" else table.column_names[0]
    keys = sorted({row[table.column_names.index(key)] for row in written(table, of)})
    final = " FINAL" if table.versioned else ""
    result = client.query(
        f"SELECT {', '.join(table.column_names)} FROM {table.name}{final} WHERE {key} IN {{keys:Array(String)}}",
        parameters={"keys": keys},
        column_formats={"original_key": "bytes", "original_value": "bytes"},
    )
    return sorted(result.result_rows, key=_sort_key)


def expected(table: TableSpec, of: list[Flush]) -> list[tuple[Any, ...]]:
    """What a reader must see: every history row; for a latest-state table the highest version of each key."""
    rows = written(table, of)
    if table.versioned:
        rows = list({row[0]: row for row in sorted(rows, key=lambda r: r[-1])}.values())
    return sorted(rows, key=_sort_key)


def _sort_key(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(str(v) for v in row)


def written(table: TableSpec, of: list[Flush]) -> list[tuple[Any, ...]]:
    return [row for flush in of for batch in flush.batches if batch.table is table for row in batch.rows]


def test_every_migration_applies_on_an_empty_database_and_a_rerun_is_a_no_op(fresh_db) -> None:
    assert [m.version for m in migrate(fresh_db)] == [m.version for m in MIGRATIONS]
    assert migrate(fresh_db) == []
    for migration in MIGRATIONS:  # every statement is itself re-runnable (a migrate interrupted mid-way)
        for statement in migration.statements:
            fresh_db.command(statement)
    assert applied(fresh_db) == {m.version: m.checksum for m in MIGRATIONS}
    tables = {row[0] for row in fresh_db.query("SHOW TABLES").result_rows}
    assert {t.name for t in TABLES} | {"sink_batches"} <= tables


def test_every_table_that_takes_inserts_has_a_deduplication_window(db) -> None:
    rows = db.query(
        "SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() AND name IN {t:Array(String)}",
        parameters={"t": [t.name for t in TABLES]},
    ).result_rows
    assert len(rows) == len(TABLES)
    assert all("non_replicated_deduplication_window = 1000" in engine for _, engine in rows)


def test_every_routed_record_round_trips_through_its_table(db) -> None:
    tag, records = scenario()
    batches = flushes(tag, records)
    for flush in batches:
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))
    for table in TABLES:
        assert written(table, batches), f"the scenario writes no {table.name} row"
        assert stored(db, table, batches) == expected(table, batches), table.name


def test_a_repeated_batch_with_the_same_token_is_dropped_in_every_history_table(db) -> None:
    tag, records = scenario()
    batches = flushes(tag, records)
    for _ in range(2):
        for flush in batches:
            for batch in flush.batches:
                write_batch(db, batch.table, batch.rows, batch.token, backoff=NO_WAIT)
    for table in (t for t in TABLES if t.name in HISTORY_TIME_COLUMNS):
        assert stored(db, table, batches) == expected(table, batches), table.name


def test_final_reads_one_row_per_key_the_highest_version_whatever_the_insert_order(db) -> None:
    tag, records = scenario()
    states = records["thread-state"]
    newest, older = states[-1], states[0]
    # the newer state (offset 9) lands before an older one (offset 2), in separate parts
    write_batch(db, THREAD_CONTEXT_LATEST, [THREAD_CONTEXT_LATEST.row(newest, 9)], f"{tag}-a", backoff=NO_WAIT)
    write_batch(db, THREAD_CONTEXT_LATEST, [THREAD_CONTEXT_LATEST.row(older, 2)], f"{tag}-b", backoff=NO_WAIT)

    latest = queries.latest_thread(db, newest.thread_id)
    assert latest is not None
    assert latest["context_budget_level"] == newest.context_budget_level
    assert latest["snapshot_id"] == newest.snapshot_id
    assert len(queries.project_threads(db, newest.project_id)) == 1


def test_open_alerts_leave_out_an_alert_whose_newest_version_is_resolved(db) -> None:
    tag, records = scenario()
    for flush in flushes(tag, {"alerts": records["alerts"]}):
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))
    thread_id = records["alerts"][0].thread_id
    every = queries.thread_alerts(db, thread_id)
    still_open = queries.thread_alerts(db, thread_id, open_only=True)
    assert len(every) == len({a.alert_id for a in records["alerts"]})
    assert [a["alert_type"] for a in still_open] == ["context_critical"]
    assert all(a["alert_status"] != AlertStatus.RESOLVED for a in still_open)


def test_project_risk_and_conversation_pages_read_the_latest_rows(db) -> None:
    tag, records = scenario()
    for flush in flushes(tag, {k: records[k] for k in ("project-risk", "conversation-indicators")}):
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))
    project = records["project-risk"][0]
    risk = queries.project_risk(db, project.project_id)
    assert risk is not None
    assert risk["next_compaction_risk_thread_id"] == project.next_compaction_risk_thread_id
    assert risk["active_thread_count"] == 1
    page = queries.conversation_indicators(db, limit=500)
    assert f"conv-{tag}" in [row["conversation_id"] for row in page]
    assert len({row["conversation_id"] for row in page}) == len(page)


class FlakyClient:
    """Fails the first `failures` inserts; `lose_ack` makes them land first (the answer is what gets lost)."""

    def __init__(self, client: Any, failures: int, lose_ack: bool) -> None:
        self._client, self.failures, self.lose_ack, self.calls = client, failures, lose_ack, 0

    def insert(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            if self.lose_ack:
                self._client.insert(*args, **kwargs)
            raise OperationalError("connection reset by peer")
        return self._client.insert(*args, **kwargs)


@pytest.mark.parametrize("lose_ack", [False, True], ids=["refused", "landed-but-unacknowledged"])
def test_a_transiently_failing_insert_is_retried_and_lands_once(db, lose_ack: bool) -> None:
    tag, records = scenario()
    batches = flushes(tag, {"alerts": records["alerts"]})
    flaky = FlakyClient(db, failures=3, lose_ack=lose_ack)
    for flush in batches:
        asyncio.run(write_flush(flaky, flush, backoff=NO_WAIT))
    assert flaky.calls == 3 + 1 + len(batches[0].batches)  # 3 failed plan inserts, the plan, then each batch
    for table in (ALERT_TRANSITIONS, THREAD_CONTEXT_ALERTS):
        assert stored(db, table, batches) == expected(table, batches)


def test_a_restarted_sink_rebuilds_the_planned_batches_and_they_are_dropped(db) -> None:
    tag, records = scenario()
    alerts = records["alerts"]
    topic = f"t{tag}.alerts"
    first_run = Batcher(ROUTES["alerts"], topic, 0, max_rows=2)
    cut = [f for offset, alert in enumerate(alerts) for f in first_run.add(offset, alert)] + first_run.flush()
    for flush in cut:
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))

    # After a crash the offsets were never committed: replay everything with other limits, guided by the plan.
    plan = planned_ranges(db, topic, 0, 0)
    assert plan == [(f.first_offset, f.last_offset) for f in cut]
    replay = Batcher(ROUTES["alerts"], topic, 0, max_rows=1000, planned=plan)
    again = [f for offset, alert in enumerate(alerts) for f in replay.add(offset, alert)] + replay.flush()
    assert [b.token for f in again for b in f.batches] == [b.token for f in cut for b in f.batches]
    for flush in again:
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))
    assert len(stored(db, ALERT_TRANSITIONS, cut)) == len(alerts)


def test_recording_a_plan_twice_keeps_one_range(db) -> None:
    tag, records = scenario()
    (flush,) = flushes(tag, {"alerts": records["alerts"]}, partition=3)
    record_plan(db, flush, backoff=NO_WAIT)
    record_plan(db, flush, backoff=NO_WAIT)
    assert planned_ranges(db, flush.topic, 3, 0) == [(flush.first_offset, flush.last_offset)]
    assert planned_ranges(db, flush.topic, 3, flush.last_offset + 1) == []


def test_history_ttl_is_set_changed_and_removed_only_when_it_differs(fresh_db) -> None:
    migrate(fresh_db)
    assert apply_history_ttl(fresh_db, 30) == list(HISTORY_TIME_COLUMNS)
    assert apply_history_ttl(fresh_db, 30) == []
    assert apply_history_ttl(fresh_db, 90) == list(HISTORY_TIME_COLUMNS)
    engine = fresh_db.query(
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'context_events'"
    ).result_rows[0][0]
    assert "TTL toDateTime(occurred_at) + toIntervalDay(90)" in engine
    assert apply_history_ttl(fresh_db, None) == list(HISTORY_TIME_COLUMNS)
    assert apply_history_ttl(fresh_db, None) == []


def test_the_latest_thread_carries_the_projections_tokens_band_and_manifest(db) -> None:
    tag, records = scenario()
    for flush in flushes(tag, records):
        asyncio.run(write_flush(db, flush, backoff=NO_WAIT))
    [projected] = records["thread-projections"]
    row = queries.latest_thread(db, projected.thread_id)
    assert row is not None
    assert row["context_budget_level"] == records["thread-state"][-1].context_budget_level  # the engine's own
    assert (row["projected_tokens"], row["context_window_tokens"]) == (projected.projected_tokens, 272_000)
    assert row["last_compaction_trigger_mode"] == projected.last_compaction_trigger_mode
    assert json.loads(row["latest_manifest"])["sections"][0]["key"] == "system"


def test_the_snapshot_history_holds_each_accepted_snapshot_once_and_the_input_log_every_verdict(db) -> None:
    tag, records = scenario()
    thread = f"thread-{tag}"
    for flush in flushes(tag, {"snapshot-verdicts": records["snapshot-verdicts"]}):
        for batch in flush.batches:
            write_batch(db, batch.table, batch.rows, batch.token)
    history = db.query(
        f"SELECT snapshot_version, context_budget_remaining_pct FROM {THREAD_CONTEXT_SNAPSHOTS.name}"
        " WHERE thread_id = {t:String} ORDER BY snapshot_version",
        parameters={"t": thread},
    ).result_rows
    assert history == [(5, 50.0), (7, 40.0)]  # neither the duplicate nor the stale v5 at 70%
    inputs = db.query(
        f"SELECT snapshot_version, context_budget_remaining_pct, accepted, verdict"
        f" FROM {THREAD_CONTEXT_SNAPSHOT_INPUTS.name} WHERE thread_id = {{t:String}}"
        " ORDER BY captured_at, snapshot_version, accepted DESC, context_budget_remaining_pct",
        parameters={"t": thread},
    ).result_rows
    assert inputs == [
        (5, 50.0, True, "accept"),
        (5, 50.0, False, "not_newer"),
        (5, 70.0, False, "not_newer"),
        (7, 40.0, True, "accept"),
    ]


def test_the_in_memory_runtime_writes_what_the_declared_sink_takes_into_clickhouse(db) -> None:
    """The topology's own declaration, run in memory with the client, writes through the same ClickHouse writer."""
    tag = uuid.uuid4().hex[:8]
    settings = Settings(roles="sinks", topic_prefix=f"t{tag}.", sink_batch_rows=1)  # each record flushes as taken
    runtime = MemoryRuntime(settings, at(0))
    wire(runtime, settings, db)
    project = f"proj-{tag}"
    runtime.produce("policies", project, policy(project))
    runtime.drain()
    assert [m.key for m in runtime.written["clickhouse_sink"]] == [project.encode()]
    rows = db.query(
        f"SELECT project_id, safe_min_pct FROM {THRESHOLD_POLICIES.name} FINAL WHERE project_id = {{p:String}}",
        parameters={"p": project},
    ).result_rows
    assert rows == [(project, 70.0)]
    runtime.close()
