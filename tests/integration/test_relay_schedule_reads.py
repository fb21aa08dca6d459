"""The relay schedule's reads on ClickHouse (api/relay_schedule.py, issue 37): running relays from the threads'
packages, futile relays from consumed packages and a relay thread's first report, caps applied in the view's order."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from api.relay_schedule import project_schedule, thread_futile_reason
from core.relay_schedule import RelayLimits
from schemas import DEFAULT_POLICY, ContextBudgetLevel, HandoffPackage, ProjectDetail, SnapshotVerdict
from schemas.views import ThreadContextSummary
from sinks.migrations import migrate
from sinks.queries import latest_thread
from tests.integration.test_api import store
from tests.unit.engine.builders import at, snapshot
from tests.unit.sinks.records import engine_outputs

pytestmark = pytest.mark.clickhouse

LIMITS = RelayLimits(per_node=2, per_project=5, repeat_seconds=600)


@pytest.fixture
def db(fresh_db) -> Any:
    migrate(fresh_db)
    return fresh_db


def put_thread(db: Any, tag: str, thread: str, project: str, handoff: HandoffPackage | None) -> None:
    """The engine's state of `thread` (on node mac-01) holding `handoff`, written the sinks' way."""
    state = engine_outputs(thread, project)["thread-state"][-1]
    store(db, tag, "thread-state", [state.model_copy(update={"handoff": handoff})])


def consumed(package: HandoffPackage, into: str, seconds: float) -> HandoffPackage:
    return package.model_copy(
        update={"package_status": "consumed", "to_thread_id": into, "consumed_at": at(seconds), "ready_at": at(0)}
    )


def summary(thread: str) -> ThreadContextSummary:
    return ThreadContextSummary(
        thread_id=thread,
        node_id="mac-01",
        context_budget_remaining_pct=20,
        context_budget_level=ContextBudgetLevel.CRITICAL,
        must_finish_before_compaction=False,
        updated_at=at(0),
    )


def test_running_relays_fill_the_node_cap_futile_ones_are_refused_and_the_rest_queue_in_order(db) -> None:
    tag, project = uuid.uuid4().hex[:6], "proj-relays"
    ready = engine_outputs("t-running", project)["thread-state"][-1].handoff.model_copy(update={"project_id": project})
    put_thread(db, tag, "t-running", project, ready)
    # t-again handed its work off 100 s before "now"; relay-d took t-d's package and first reported 50% left
    again = ready.model_copy(update={"handoff_package_id": "hp-again", "from_thread_id": "t-again"})
    put_thread(db, tag, "t-again", project, consumed(again, "relay-again", 500))
    put_thread(db, tag, "relay-d", project, None)
    from_d = ready.model_copy(update={"handoff_package_id": "hp-d", "from_thread_id": "t-d"})
    put_thread(db, tag, "t-d", project, consumed(from_d, "relay-d", 100))
    first = [snapshot(p, thread="relay-d", project=project, seconds=s) for p, s in ((90, 50), (50, 110), (40, 200))]
    store(db, tag, "snapshot-verdicts", [SnapshotVerdict(snapshot=s, accepted=True, verdict="accept") for s in first])
    for thread in ("t-first", "t-second"):
        put_thread(db, tag, thread, project, None)
    wanting = ["t-again", "relay-d", "t-first", "t-second", "t-running"]
    detail = ProjectDetail(
        project_id=project,
        active_thread_contexts=[summary(t) for t in wanting],
        threads_requiring_handoff=wanting,
    )

    schedule = project_schedule(db, detail, DEFAULT_POLICY, LIMITS, now=at(600))

    assert schedule.running == ["t-running"]
    assert schedule.node_relays == {"mac-01": 1}
    assert [(e.thread_id, e.verdict.value, e.queue_position) for e in schedule.relays] == [
        ("t-again", "futile", None),
        ("relay-d", "futile", None),
        ("t-first", "start", None),
        ("t-second", "queued", 1),
    ]
    assert schedule.relays[0].reason.startswith("the same work was relayed 100 s ago")
    assert schedule.relays[1].reason.startswith("its relay started at 50% left")  # 90% came before the consume
    assert schedule.relays[3].reason == "node mac-01 already runs 2 relays (cap 2)"
    assert schedule.new_subtask.thread_id is None
    row = latest_thread(db, "relay-d")
    assert thread_futile_reason(db, row, DEFAULT_POLICY, LIMITS).startswith("its relay started at 50% left")
    assert thread_futile_reason(db, latest_thread(db, "t-first"), DEFAULT_POLICY, LIMITS) == ""


def test_the_same_work_is_no_longer_futile_once_the_repeat_window_passed(db) -> None:
    tag, project = uuid.uuid4().hex[:6], "proj-window"
    package = engine_outputs("t-old", project)["thread-state"][-1].handoff.model_copy(update={"project_id": project})
    put_thread(db, tag, "t-old", project, consumed(package, "relay-old", 0))
    detail = ProjectDetail(
        project_id=project, active_thread_contexts=[summary("t-old")], threads_requiring_handoff=["t-old"]
    )
    later = project_schedule(db, detail, DEFAULT_POLICY, LIMITS, now=at(0) + timedelta(seconds=601))
    assert [(e.thread_id, e.verdict.value) for e in later.relays] == [("t-old", "start")]
