"""The relay analytics views (migration 10, issue 37) on a crafted dataset, each figure worked out in the comments.

Rows go in through the sinks' own row specs; every history record the folds may publish twice is loaded twice.

Threads: thread-a runs Codex (its reports name the tool and model), thread-b Claude Code, thread-c never said (its
compaction names the model). All in proj-a but thread-z in proj-z.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.tokens import Role
from reporter.relay.assembly import FACTS_ONLY_MARK
from schemas import ContextAlert, ContextEvent, HandoffPackage, MasterActionRecord, Record, ThreadContextSnapshot
from schemas.events import CompactionFinished
from sinks.migrations import FACTS_ONLY, migrate
from sinks.rows import TableSpec
from sinks.tables import (
    COMPACTION_EVENTS,
    CONTEXT_EVENTS,
    MASTER_ACTIONS,
    THREAD_CONTEXT_ALERTS,
    THREAD_CONTEXT_LATEST,
    THREAD_CONTEXT_SNAPSHOTS,
    THREAD_HANDOFF_PACKAGES,
)
from tests.conftest import fresh_database
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app
from tests.unit.sinks.records import engine_outputs

pytestmark = pytest.mark.clickhouse

DAY1 = datetime(2026, 3, 25, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
AGENT_SUMMARY = "Refactored the parser; next: wire the tests."


def at(hour: int, minute: int = 0, day: datetime = DAY1) -> datetime:
    return day + timedelta(hours=hour, minutes=minute)


def load(client: Any, table: TableSpec, records: list[Record]) -> None:
    client.insert(
        table.name, [table.row(r, offset) for offset, r in enumerate(records)], column_names=list(table.column_names)
    )


def rows(client: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) for r in client.query(sql).named_results()]


def project_of(thread: str) -> str:
    return "proj-z" if thread == "thread-z" else "proj-a"


def report(thread: str, when: datetime, tool: str | None, model: str | None) -> ThreadContextSnapshot:
    return ThreadContextSnapshot(
        snapshot_id=f"s-{thread}-{when.isoformat()}",
        thread_id=thread,
        project_id=project_of(thread),
        node_id="mac-01",
        worker_id="w-1",
        source_kind="codex_sdk",
        context_budget_remaining_pct=50.0,
        context_budget_level="watch",
        snapshot_version=1,
        captured_at=when,
        agent_tool=tool,
        model=model,
    )


def updated(thread: str, when: datetime, level: str, pct: float = 50.0, reason: str = "") -> ContextEvent:
    return ContextEvent(
        event_id=f"{thread}:{when.isoformat()}",
        reason=reason,
        event_type="thread.context.updated",
        thread_id=thread,
        project_id=project_of(thread),
        occurred_at=when,
        context_budget_remaining_pct=pct,
        context_budget_level=level,
    )


def compaction(
    event_id: str, thread: str, began: datetime | None, ready: bool, completed: datetime | None = None
) -> CompactionFinished:
    return CompactionFinished(
        event_id=event_id,
        thread_id=thread,
        project_id=project_of(thread),
        trigger_mode="mid_loop",
        model="gpt-5-codex",
        started_at=began,
        completed_at=completed or began + timedelta(minutes=1),
        handoff_ready=ready,
    )


def package(package_id: str, thread: str, created: datetime, summary: str, ready: bool = True) -> HandoffPackage:
    return HandoffPackage(
        handoff_package_id=package_id,
        project_id=project_of(thread),
        from_thread_id=thread,
        package_status="ready" if ready else "draft",
        summary_text=summary,
        created_at=created,
        ready_at=created + timedelta(minutes=5) if ready else None,
    )


def alert(alert_id: str, thread: str, kind: str, opened: datetime, status: str = "opened") -> ContextAlert:
    return ContextAlert(
        alert_id=alert_id,
        thread_id=thread,
        project_id=project_of(thread),
        alert_type=kind,
        alert_status=status,
        opened_at=opened,
        resolved_at=opened + timedelta(minutes=3) if status == "resolved" else None,
    )


def action(
    action_id: str, thread: str, issued: datetime, state: str = "issued", changed: datetime | None = None,
    reason: str = "", kind: str = "prepare_handoff",
) -> MasterActionRecord:  # fmt: skip
    return MasterActionRecord(
        action_id=action_id,
        thread_id=thread,
        project_id=project_of(thread),
        context_budget_level="urgent",
        actions=[kind],
        issued_at=issued,
        state=state,
        state_changed_at=changed or issued,
        state_reason=reason,
    )


def readied(action_id: str, thread: str, issued: datetime, wait_seconds: int) -> list[MasterActionRecord]:
    """A prepare_handoff issued, acknowledged, and done once a package got ready `wait_seconds` later."""
    return [
        action(action_id, thread, issued),
        action(action_id, thread, issued, "acknowledged", issued + timedelta(seconds=1)),
        action(action_id, thread, issued, "done", issued + timedelta(seconds=wait_seconds), "handoff_ready"),
    ]


FACTS = f"{FACTS_ONLY_MARK}\nedited src/parser.py"


@pytest.fixture(scope="module")
def relay(clickhouse: Any) -> Iterator[Any]:
    with fresh_database(clickhouse) as client:
        migrate(client)
        load(
            client,
            THREAD_CONTEXT_SNAPSHOTS,
            [
                report("thread-a", at(7), "codex", "gpt-5.1-codex"),
                report("thread-a", at(8), "codex", "gpt-5.3-codex"),  # the newest that names one wins
                report("thread-a", at(9), None, None),
                report("thread-b", at(7), "claude-code", "claude-sonnet-4-5"),
                report("thread-c", at(7), None, None),
                report("thread-z", at(7), "codex", "gpt-5.3-codex"),
            ],
        )
        a_levels = [
            updated("thread-a", at(8), "safe", 90.0),
            updated("thread-a", at(9), "watch", 60.0),
            updated("thread-a", at(10), "urgent", 25.0),
            updated("thread-a", at(12), "safe", 95.0),  # closes the urgent 2 hours
            updated("thread-a", at(12, 30), "safe", 95.0, reason="stale"),  # no report came: silent until 14:00
            updated("thread-a", at(14), "safe", 94.0),  # newest: still open
        ]
        b_levels = [updated("thread-b", at(0, 0, DAY2), "safe"), updated("thread-b", at(0, 30, DAY2), "watch")]
        load(client, CONTEXT_EVENTS, [*a_levels, *b_levels, a_levels[1]])  # one published twice
        compactions = [
            compaction("cc-a1", "thread-a", at(10), True),  # newest ready before: hp-a1, the agent's own
            compaction("cc-a2", "thread-a", at(11), True),  # newest ready before: hp-a2, facts only
            compaction("cc-a3", "thread-a", at(12), False),  # hp-a2 was there, but not of this cycle
            compaction("cc-b1", "thread-b", at(0, 10, DAY2), False),
            compaction("cc-b2", "thread-b", None, True, completed=at(0, 20, DAY2)),  # began unknown: its end
            compaction("cc-c1", "thread-c", at(9), False),
            compaction("cc-z1", "thread-z", at(9), True),
        ]
        load(client, COMPACTION_EVENTS, [*compactions, compactions[0]])
        load(
            client,
            THREAD_HANDOFF_PACKAGES,
            [
                package("hp-a1", "thread-a", at(9, 40), AGENT_SUMMARY),  # ready 9:45
                package("hp-a2", "thread-a", at(10, 20), FACTS, ready=False),
                package("hp-a2", "thread-a", at(10, 20), FACTS),  # then ready 10:25: FINAL keeps this one
                package("hp-a3", "thread-a", at(13), FACTS, ready=False),  # a draft: counted when created
                package("hp-b1", "thread-b", at(0, 5, DAY2), AGENT_SUMMARY),  # ready 0:10, the agent's own
                package("hp-z1", "thread-z", at(8), AGENT_SUMMARY),
            ],
        )
        load(
            client,
            THREAD_CONTEXT_ALERTS,
            [
                alert("al-1", "thread-a", "handoff_missing", at(11)),
                alert("al-1", "thread-a", "handoff_missing", at(11), "resolved"),  # the same incident
                alert("al-2", "thread-a", "context_urgent", at(10)),
                alert("al-3", "thread-b", "handoff_missing", at(0, 15, DAY2)),
            ],
        )
        load(
            client,
            MASTER_ACTIONS,
            [
                *readied("act-1", "thread-a", at(9), 2_700),
                *readied("act-2", "thread-a", at(10, 15), 600),
                *readied("act-3", "thread-a", at(13), 120),
                action("act-4", "thread-a", at(11, 30)),
                action("act-4", "thread-a", at(11, 30), "superseded", at(12), "compacted"),
                action("act-5", "thread-a", at(10, 5), kind="compact_now"),  # not a prepare_handoff
                action("act-6", "thread-a", at(13, 30), "done", at(13, 40), "worker"),  # done, but not readied
                *readied("act-7", "thread-b", at(0, 1, DAY2), 90),
                *readied("act-7", "thread-b", at(0, 1, DAY2), 90),  # published twice
            ],
        )
        yield client


def test_the_views_match_the_relays_own_facts_only_mark() -> None:
    assert f"'{FACTS_ONLY_MARK}'" == FACTS_ONLY


def test_each_thread_has_the_tool_and_model_its_newest_report_names(relay: Any) -> None:
    got = rows(relay, "SELECT thread_id, project_id, agent_tool, model FROM analytics_thread_tools ORDER BY thread_id")
    assert got == [
        ("thread-a", "proj-a", "codex", "gpt-5.3-codex"),
        ("thread-b", "proj-a", "claude-code", "claude-sonnet-4-5"),
        ("thread-c", "proj-a", "unknown", "gpt-5-codex"),  # from its compaction
        ("thread-z", "proj-z", "codex", "gpt-5.3-codex"),
    ]


def test_relay_per_project_tool_model_and_day(relay: Any) -> None:
    got = rows(
        relay,
        "SELECT day, project_id, agent_tool, model, compactions, with_ready_package, ready_package_share,"
        " with_agent_part, agent_part_share, packages, facts_only_packages, handoff_missing,"
        " prepare_handoff_issued, prepare_handoff_readied, ready_p50_seconds, ready_p99_seconds,"
        " thread_hours, compactions_per_thread_hour"
        " FROM analytics_relay_daily ORDER BY day, project_id, agent_tool",
    )
    d1, d2 = DAY1.date(), DAY2.date()
    # fmt: off
    assert got == [
        # cc-a1..3 (cc-a1 twice, counted once): 2 ready, 1 with the agent's own part (cc-a1: hp-a1); hp-a1..3, two
        # facts only; al-1 (one incident in two versions); act-1, 2, 3, 4, 6 issued, 1..3 readied: waits 120, 600,
        # 2700, nearest rank below: p50 and p99 both the 2nd; 4.5 thread-hours (8:00 -> 12:30; stale to 14:00) -> 3/4.5
        (d1, "proj-a", "codex", "gpt-5.3-codex", 3, 2, 2 / 3, 1, 1 / 3, 3, 2, 1, 5, 3, 600.0, 600.0, 4.5, 3 / 4.5),
        (d1, "proj-a", "unknown", "gpt-5-codex", 1, 0, 0.0, 0, 0.0, 0, 0, 0, 0, 0, None, None, 0.0, None),
        (d1, "proj-z", "codex", "gpt-5.3-codex", 1, 1, 1.0, 1, 1.0, 1, 0, 0, 0, 0, None, None, 0.0, None),
        # cc-b1, cc-b2 (ready: hp-b1, the agent's own); act-7 once; half an hour -> 2 / 0.5
        (d2, "proj-a", "claude-code", "claude-sonnet-4-5", 2, 1, 0.5, 1, 0.5, 1, 0, 1, 1, 1, 90.0, 90.0, 0.5, 4.0),
    ]
    # fmt: on


def test_hours_per_level_and_stale_per_project_tool_model_and_day(relay: Any) -> None:
    got = rows(
        relay,
        "SELECT day, agent_tool, model, level, thread_hours FROM analytics_levels_daily"
        " ORDER BY day, agent_tool, level",
    )
    assert got == [
        (date(2026, 3, 25), "codex", "gpt-5.3-codex", "safe", 1.5),  # 8:00 -> 9:00, 12:00 -> 12:30
        (date(2026, 3, 25), "codex", "gpt-5.3-codex", "stale", 1.5),  # not at safe: the thread was silent
        (date(2026, 3, 25), "codex", "gpt-5.3-codex", "urgent", 2.0),
        (date(2026, 3, 25), "codex", "gpt-5.3-codex", "watch", 1.0),
        (date(2026, 3, 26), "claude-code", "claude-sonnet-4-5", "safe", 0.5),
    ]


def test_a_threads_timeline_has_its_budget_and_each_compaction_action_state_and_package_once(relay: Any) -> None:
    got = rows(
        relay,
        "SELECT at, kind, ref, remaining_pct, label, detail FROM analytics_thread_timeline"
        f" WHERE thread_id = 'thread-a' AND at <= '{at(11):%Y-%m-%d %H:%M:%S}' ORDER BY at, kind, ref, detail",
    )
    assert got == [
        (at(8), "budget", f"thread-a:{at(8).isoformat()}", 90.0, "safe", ""),
        (at(9), "budget", f"thread-a:{at(9).isoformat()}", 60.0, "watch", ""),  # published twice, once here
        (at(9), "master_action", "act-1", None, "prepare_handoff", "issued"),
        (at(9) + timedelta(seconds=1), "master_action", "act-1", None, "prepare_handoff", "acknowledged"),
        (at(9, 45), "master_action", "act-1", None, "prepare_handoff", "done"),
        (at(9, 45), "package", "hp-a1", None, "ready", "agent"),
        (at(10), "budget", f"thread-a:{at(10).isoformat()}", 25.0, "urgent", ""),
        (at(10), "compaction", "cc-a1", None, "mid_loop", "ready"),  # published twice, once here
        (at(10, 5), "master_action", "act-5", None, "compact_now", "issued"),
        (at(10, 15), "master_action", "act-2", None, "prepare_handoff", "issued"),
        (at(10, 15) + timedelta(seconds=1), "master_action", "act-2", None, "prepare_handoff", "acknowledged"),
        (at(10, 25), "master_action", "act-2", None, "prepare_handoff", "done"),
        (at(10, 25), "package", "hp-a2", None, "ready", "facts_only"),
        (at(11), "compaction", "cc-a2", None, "mid_loop", "ready"),
    ]


# -- the API's reads of these views, with roles and project scope ---------------------------------------------------


@pytest.fixture(scope="module")
def http(relay: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    for thread in ("thread-a", "thread-z"):  # the threads' latest state: their project, for the timeline's scope
        load(relay, THREAD_CONTEXT_LATEST, engine_outputs(thread, project_of(thread))["thread-state"][-1:])
    with TestClient(make_app(tmp_path_factory.mktemp("api"), RecordingPublisher(), clickhouse=relay)) as client:
        yield client


USER_A = bearer(Role.USER, "kris", "proj-a")
OPERATOR = bearer(Role.OPERATOR, "ops")
A_YEAR = {"days": 366}  # the dataset's days are in March 2026


def test_a_user_reads_the_relay_days_of_its_own_projects_only(http: TestClient) -> None:
    answer = http.get("/api/v1/analytics/relay", params=A_YEAR, headers=USER_A)
    assert answer.status_code == 200
    body = answer.json()
    assert {(r["day"], r["project_id"], r["agent_tool"]) for r in body["relay"]} == {
        ("2026-03-25", "proj-a", "codex"),
        ("2026-03-25", "proj-a", "unknown"),
        ("2026-03-26", "proj-a", "claude-code"),
    }
    codex = next(r for r in body["relay"] if r["agent_tool"] == "codex")
    assert (codex["compactions"], codex["with_agent_part"], codex["ready_p50_seconds"]) == (3, 1, 600.0)
    assert {(r["agent_tool"], r["level"], r["thread_hours"]) for r in body["levels"]} == {
        ("codex", "safe", 1.5),
        ("codex", "stale", 1.5),
        ("codex", "watch", 1.0),
        ("codex", "urgent", 2.0),
        ("claude-code", "safe", 0.5),
    }


def test_another_projects_relay_days_are_404_to_a_user_and_open_to_an_operator(http: TestClient) -> None:
    assert (
        http.get("/api/v1/analytics/relay", params={**A_YEAR, "project_id": "proj-z"}, headers=USER_A).status_code
        == 404
    )
    answer = http.get("/api/v1/analytics/relay", params={**A_YEAR, "project_id": "proj-z"}, headers=OPERATOR)
    assert [(r["project_id"], r["compactions"]) for r in answer.json()["relay"]] == [("proj-z", 1)]
    everything = http.get("/api/v1/analytics/relay", params=A_YEAR, headers=OPERATOR).json()
    assert len(everything["relay"]) == 4


def test_the_relay_days_start_at_the_window(http: TestClient) -> None:
    answer = http.get("/api/v1/analytics/relay", params={"days": 7}, headers=OPERATOR).json()
    assert answer["relay"] == []
    assert answer["levels"] == []


def test_a_worker_may_not_read_the_analytics(http: TestClient) -> None:
    worker = bearer(Role.WORKER, "w-1", "proj-a")
    assert http.get("/api/v1/analytics/relay", headers=worker).status_code == 403
    assert http.get("/api/v1/threads/thread-a/timeline", headers=worker).status_code == 403


def test_a_threads_timeline_is_its_projects_callers_and_keeps_the_newest_points(http: TestClient) -> None:
    answer = http.get("/api/v1/threads/thread-a/timeline", headers=USER_A)
    assert answer.status_code == 200
    body = answer.json()
    assert (body["project_id"], body["truncated"]) == ("proj-a", False)
    kinds = [p["kind"] for p in body["points"]]
    assert (kinds.count("budget"), kinds.count("compaction"), kinds.count("package")) == (6, 3, 3)
    assert body["points"][0] == {
        "schema_version": 1,
        "at": "2026-03-25T08:00:00Z",
        "kind": "budget",
        "ref": f"thread-a:{at(8).isoformat()}",
        "remaining_pct": 90.0,
        "label": "safe",
        "detail": "",
    }
    newest = http.get("/api/v1/threads/thread-a/timeline", params={"limit": 2}, headers=USER_A).json()
    assert newest["truncated"] is True
    assert [p["ref"] for p in newest["points"]] == [p["ref"] for p in body["points"][-2:]]
    assert http.get("/api/v1/threads/thread-z/timeline", headers=USER_A).status_code == 404
    assert http.get("/api/v1/threads/thread-z/timeline", headers=OPERATOR).status_code == 200
    assert http.get("/api/v1/threads/thread-none/timeline", headers=OPERATOR).status_code == 404
