"""The analysts' views (migration 6) on a crafted dataset, each number worked out by hand in the comments.

Rows go in through the sinks' own row specs, so the views are tested on exactly what the sinks write. Every history
view must read a record the folds published twice (the same id at another offset) once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from schemas import ContextAlert, ContextEvent, HandoffPackage, Record, ThreadContextSnapshot
from schemas.events import CompactionFinished
from schemas.projection import EstimateAccuracy, ThreadProjection
from sinks.migrations import migrate
from sinks.rows import TableSpec
from sinks.tables import (
    COMPACTION_EVENTS,
    CONTEXT_EVENTS,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_SNAPSHOTS,
    THREAD_HANDOFF_PACKAGES,
    THREAD_PROJECTION_HISTORY,
)
from tests.conftest import fresh_database

pytestmark = pytest.mark.clickhouse

DAY1 = datetime(2026, 3, 25, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
PROJECT = "proj-a"


def at(hour: int, minute: int = 0, day: datetime = DAY1) -> datetime:
    return day + timedelta(hours=hour, minutes=minute)


def load(client: Any, table: TableSpec, records: list[Record]) -> None:
    client.insert(
        table.name, [table.row(r, offset) for offset, r in enumerate(records)], column_names=list(table.column_names)
    )


def rows(client: Any, sql: str) -> list[dict[str, Any]]:
    return list(client.query(sql).named_results())


def context_event(thread: str, when: datetime, level: str, previous: str | None = None) -> ContextEvent:
    """`thread.context.updated`, or `level_changed` from `previous`."""
    kind = "level_changed" if previous else "updated"
    return ContextEvent(
        event_id=f"{thread}:{when.isoformat()}:{kind}",
        event_type=f"thread.context.{kind}",
        thread_id=thread,
        project_id=PROJECT,
        occurred_at=when,
        context_budget_remaining_pct=50.0,
        context_budget_level=level,
        previous_level=previous,
    )


def compaction(
    n: int, mode: str, profile: str | None, ready: bool, day: datetime = DAY1, wrap_up: bool = True
) -> CompactionFinished:
    return CompactionFinished(
        wrap_up_requested=wrap_up,
        event_id=f"cc-{n}",
        thread_id="thread-a",
        project_id=PROJECT,
        trigger_mode=mode,
        model_profile=profile,
        completed_at=at(10, n, day),
        handoff_ready=ready,
    )


def package(package_id: str, thread: str, ready_at: datetime) -> HandoffPackage:
    return HandoffPackage(
        handoff_package_id=package_id,
        project_id=PROJECT,
        from_thread_id=thread,
        package_status="ready",
        created_at=ready_at - timedelta(minutes=1),
        ready_at=ready_at,
    )


def alert(alert_id: str, status: str, acked: datetime | None = None, resolved: datetime | None = None) -> ContextAlert:
    return ContextAlert(
        alert_id=alert_id,
        thread_id="thread-a",
        project_id=PROJECT,
        alert_type="context_urgent",
        alert_status=status,
        opened_at=at(8),
        acked_at=acked,
        resolved_at=resolved,
    )


def projection(thread: str, when: datetime, truncated: int, accuracy: tuple[int, int, int, int], *,
               expected: tuple[datetime, datetime, datetime] | None = None) -> ThreadProjection:  # fmt: skip
    checks, abs_error, signed_error, sampled = accuracy
    at_, earliest, latest = expected or (None, None, None)
    return ThreadProjection(
        thread_id=thread,
        project_id=PROJECT,
        projected_tokens=100_000,
        surface_tokens=100_000,
        context_window_tokens=272_000,
        truncated_tool_results=truncated,
        estimated_remaining_turns=10 if expected else None,
        compaction_expected_at=at_,
        compaction_expected_earliest_at=earliest,
        compaction_expected_latest_at=latest,
        estimate_accuracy=EstimateAccuracy(
            checks=checks, abs_error_tokens=abs_error, signed_error_tokens=signed_error, sampled_tokens=sampled
        ),
        updated_at=when,
    )


def snapshot(snapshot_id: str, source: str, captured: datetime, expected: datetime) -> ThreadContextSnapshot:
    return ThreadContextSnapshot(
        snapshot_id=snapshot_id,
        thread_id="thread-a",
        project_id=PROJECT,
        node_id="mac-01",
        worker_id="w-1",
        source_kind=source,
        context_budget_remaining_pct=45.0,
        context_budget_level="watch",
        compaction_expected_at=expected,
        estimated_remaining_turns=14,
        snapshot_version=1,
        captured_at=captured,
    )


@pytest.fixture(scope="module")
def analytics(clickhouse: Any) -> Iterator[Any]:
    with fresh_database(clickhouse) as client:
        migrate(client)
        a_updates = [
            context_event("thread-a", at(8, 0), "safe"),
            context_event("thread-a", at(8, 10), "watch"),
            context_event("thread-a", at(8, 25), "urgent"),
            context_event("thread-a", at(8, 30), "urgent"),
            context_event("thread-a", at(8, 40), "critical"),  # newest: still open, not counted
        ]
        b_updates = [context_event("thread-b", at(23, 55), "safe"), context_event("thread-b", at(0, 5, DAY2), "watch")]
        c_changes = [
            context_event("thread-c", at(9, 0), "urgent", previous="watch"),
            context_event("thread-c", at(9, 30), "watch", previous="urgent"),  # a compaction brought it back
        ]
        a_changes = [
            context_event("thread-a", at(8, 10), "watch", previous="safe"),
            context_event("thread-a", at(8, 25), "urgent", previous="watch"),
            context_event("thread-a", at(8, 40), "critical", previous="urgent"),  # still within the urgent episode
        ]
        events = [*a_updates, *b_updates, *a_changes, *c_changes]
        load(client, CONTEXT_EVENTS, [*events, a_updates[1], a_changes[1]])  # two published twice
        compactions = [
            compaction(1, "mid_loop", "codex", True),
            compaction(2, "mid_loop", "codex", False, wrap_up=False),
            compaction(3, "manual", "claude-code", True),
            compaction(4, "request_start", None, False, DAY2, wrap_up=True),
        ]
        load(client, COMPACTION_EVENTS, [*compactions, compactions[0]])
        load(
            client,
            THREAD_HANDOFF_PACKAGES,
            [
                package("hp-a", "thread-a", at(8, 35)),  # urgent since 8:25
                package("hp-b", "thread-b", at(8, 0)),  # thread-b never went urgent
                package("hp-c", "thread-c", at(9, 40)),  # urgent 9:00-9:30, back to watch when it got ready
            ],
        )
        load(
            client,
            THREAD_CONTEXT_ALERTS,  # versions in offset order: the newest of each alert wins under FINAL
            [
                alert("al-1", "opened"),
                alert("al-2", "opened"),
                alert("al-1", "acked", acked=at(8, 2)),
                alert("al-1", "resolved", acked=at(8, 2), resolved=at(8, 10)),
            ],
        )
        band = (at(9, 20), at(9, 0), at(9, 40))
        load(
            client,
            THREAD_PROJECTION_HISTORY,
            [
                projection("thread-a", at(8), 1, (2, 300, -100, 20_000), expected=band),
                projection("thread-a", at(12), 3, (5, 600, 200, 50_000)),
                projection("thread-a", at(12), 3, (5, 600, 200, 50_000)),  # published twice
                projection("thread-a", at(9, day=DAY2), 4, (6, 700, 100, 60_000)),
                projection("thread-b", at(8), 0, (4, 400, 400, 40_000)),
                projection("thread-b", at(8, day=DAY2), 0, (1, 50, -50, 9_000)),  # restored from an older fold
            ],
        )
        worker = snapshot("s-worker", "codex_sdk", at(8, 30), at(9, 30))
        load(
            client,
            THREAD_CONTEXT_SNAPSHOTS,
            [
                worker,
                worker,
                snapshot("s-early", "codex_sdk", at(7), at(9, 30)),  # before the engine projected anything
                snapshot("s-estimator", "worker_estimator", at(8, 30), at(9, 20)),  # the engine's own
            ],
        )
        yield client


def test_time_per_level_counts_each_interval_once_on_the_day_it_started(analytics: Any) -> None:
    got = rows(analytics, "SELECT day, thread_id, level, seconds FROM analytics_level_time ORDER BY thread_id, level")
    assert [(r["day"], r["thread_id"], r["level"], r["seconds"]) for r in got] == [
        (date(2026, 3, 25), "thread-a", "safe", 600.0),
        (date(2026, 3, 25), "thread-a", "urgent", 900.0),  # 8:25 -> 8:30 -> 8:40
        (date(2026, 3, 25), "thread-a", "watch", 900.0),
        (date(2026, 3, 25), "thread-b", "safe", 600.0),  # 23:55 -> 0:05 counts on the day it started
    ]
    per_project = rows(analytics, "SELECT sum(seconds) AS s FROM analytics_level_time WHERE project_id = 'proj-a'")
    assert per_project[0]["s"] == 3_000.0


def test_compactions_per_day_by_trigger_mode_and_profile_with_the_ready_handoff_share(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT day, trigger_mode, model_profile, compactions, with_ready_handoff, ready_handoff_share"
        " FROM analytics_compactions_daily ORDER BY day, trigger_mode, model_profile",
    )
    assert [tuple(r.values()) for r in got] == [
        (date(2026, 3, 25), "manual", "claude-code", 1, 1, 1.0),
        (date(2026, 3, 25), "mid_loop", "codex", 2, 1, 0.5),  # cc-1 was published twice, counted once
        (date(2026, 3, 26), "request_start", "unknown", 1, 0, 0.0),
    ]


def test_compactions_per_day_count_the_wrap_up_requests_apart_from_the_ready_packages(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT day, trigger_mode, compactions, with_ready_handoff, with_wrap_up_requested, wrap_up_requested_share"
        " FROM analytics_compactions_daily ORDER BY day, trigger_mode, model_profile",
    )
    assert [tuple(r.values()) for r in got] == [
        (date(2026, 3, 25), "manual", 1, 1, 1, 1.0),
        (date(2026, 3, 25), "mid_loop", 2, 1, 1, 0.5),  # cc-2: neither requested nor ready
        (date(2026, 3, 26), "request_start", 1, 0, 1, 1.0),  # requested, yet no package was ready (spec 9.5)
    ]


def test_time_from_entering_urgent_to_a_ready_package(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT handoff_package_id, urgent_at, seconds_from_urgent FROM analytics_urgent_to_handoff_ready"
        " ORDER BY handoff_package_id",
    )
    assert [tuple(r.values()) for r in got] == [
        ("hp-a", at(8, 25), 600.0),
        ("hp-b", None, None),
        ("hp-c", None, None),
    ]


def test_alert_time_to_ack_and_to_resolve(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT alert_id, alert_status, seconds_to_ack, seconds_to_resolve FROM analytics_alert_response"
        " ORDER BY alert_id",
    )
    assert [tuple(r.values()) for r in got] == [("al-1", "resolved", 120.0, 600.0), ("al-2", "opened", None, None)]


def test_truncated_tool_results_and_estimator_error_per_thread_and_day(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT day, thread_id, truncated_tool_results, estimate_checks, abs_error_tokens, signed_error_tokens,"
        " mean_abs_error_tokens, mean_signed_error_tokens, relative_abs_error"
        " FROM analytics_projection_daily ORDER BY thread_id, day",
    )
    assert [tuple(r.values()) for r in got] == [
        (date(2026, 3, 25), "thread-a", 3, 5, 600, 200, 120.0, 40.0, 600 / 50_000),
        (date(2026, 3, 26), "thread-a", 1, 1, 100, -100, 100.0, -100.0, 100 / 10_000),
        (date(2026, 3, 25), "thread-b", 0, 4, 400, 400, 100.0, 100.0, 400 / 40_000),
        (date(2026, 3, 26), "thread-b", 0, 1, 50, -50, 50.0, -50.0, 50 / 9_000),  # totals restarted: the day whole
    ]


def test_a_workers_forecast_is_compared_with_the_engines_projection_at_that_time(analytics: Any) -> None:
    got = rows(
        analytics,
        "SELECT snapshot_id, worker_expected_at, engine_expected_at, worker_minus_engine_seconds,"
        " within_engine_band, worker_remaining_turns, engine_remaining_turns FROM analytics_forecast_comparison",
    )
    assert [tuple(r.values()) for r in got] == [("s-worker", at(9, 30), at(9, 20), 600.0, True, 14, 10)]
