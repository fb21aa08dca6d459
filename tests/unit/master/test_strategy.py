"""The master's strategy (spec 8.2) over the project JSON: critical first, must-finish first within a level, the
project's rank order otherwise, then urgent, then watch; never a thread already asked, a stale one or a safe one;
a package is consumed only once its thread compacted past it; requests scheduled under the relay caps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.relay_schedule import RelaySlot
from master.strategy import consumable, handoff_requests, relay_thread_id, scheduled

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def thread(
    thread_id: str, level: str, pct: float, *, must_finish: bool = False, stale: bool = False, node: str = "node-1"
) -> dict:
    return {
        "thread_id": thread_id,
        "node_id": node,
        "context_budget_level": level,
        "context_budget_remaining_pct": pct,
        "must_finish_before_compaction": must_finish,
        "stale": stale,
    }


def project(project_id: str, threads: list[dict], requiring: list[str] | None = None) -> dict:
    ids = [t["thread_id"] for t in threads if t["context_budget_level"] != "safe"]
    return {
        "project_id": project_id,
        "active_thread_contexts": threads,
        "threads_requiring_handoff": ids if requiring is None else requiring,
    }


def order(projects: list[dict], asked: list[str] = ()) -> list[str]:
    return [r.thread_id for r in handoff_requests(projects, asked)]


def test_critical_before_urgent_before_watch_across_projects() -> None:
    a = project("p-a", [thread("a-urgent", "urgent", 35), thread("a-watch", "watch", 55)])
    b = project("p-b", [thread("b-critical", "critical", 8), thread("b-safe", "safe", 90)])
    assert order([a, b]) == ["b-critical", "a-urgent", "a-watch"]


def test_among_criticals_must_finish_work_comes_first_then_the_projects_rank() -> None:
    ranked = [
        thread("c-patch", "critical", 9),  # the project ranked it first (say, an uncommitted patch)
        thread("c-plain", "critical", 5),
        thread("c-must", "critical", 12, must_finish=True),
    ]
    assert order([project("p", ranked)]) == ["c-must", "c-patch", "c-plain"]


def test_only_threads_the_project_says_require_a_handoff_fresh_and_not_asked() -> None:
    threads = [
        thread("ready", "critical", 5),  # its package is ready: not in threads_requiring_handoff
        thread("stale", "urgent", 30, stale=True),
        thread("asked", "urgent", 31),
        thread("due", "urgent", 32),
    ]
    assert order([project("p", threads, ["stale", "asked", "due"])], asked=["asked"]) == ["due"]


def test_a_request_says_why() -> None:
    (request,) = handoff_requests([project("p", [thread("t", "critical", 7.4, must_finish=True)])])
    assert (request.project_id, request.level, request.reason) == (
        "p",
        "critical",
        "critical: 7% left, unsaved work to save first",
    )


def package(package_id: str, status: str, created: float) -> dict:
    return {
        "handoff_package_id": package_id,
        "package_status": status,
        "created_at": (T0 + timedelta(seconds=created)).isoformat(),
    }


def test_a_ready_package_is_consumed_only_once_its_thread_compacted_past_it() -> None:
    packages = [package("hp-2", "ready", 20), package("hp-1", "ready", 10), package("hp-0", "consumed", 5)]
    assert consumable(packages, None) == []
    assert [p["handoff_package_id"] for p in consumable(packages, T0 + timedelta(seconds=15))] == ["hp-1"]
    assert [p["handoff_package_id"] for p in consumable(packages, T0 + timedelta(seconds=30))] == ["hp-1", "hp-2"]


def test_the_relay_thread_id_fits_the_contract() -> None:
    assert relay_thread_id({"handoff_package_id": "hp-7"}) == "relay-hp-7"
    assert len(relay_thread_id({"handoff_package_id": "x" * 128})) == 128


def relay_schedule(
    project_id: str,
    *,
    running: list[str] = (),
    node_relays: dict[str, int] | None = None,
    futile: dict[str, str] | None = None,
    per_node: int = 2,
    per_project: int = 4,
) -> dict:
    """A `relay_schedule` answer as the API gives it (its `relays` only matter for their futile verdicts here)."""
    return {
        "project_id": project_id,
        "limits": {"per_node": per_node, "per_project": per_project, "repeat_seconds": 600.0, "schema_version": 1},
        "running": list(running),
        "node_relays": node_relays or {},
        "relays": [{"thread_id": t, "verdict": "futile", "reason": why} for t, why in (futile or {}).items()],
        "new_subtask": {"thread_id": None, "reason": "no free safe thread (1 critical): start a fresh thread"},
    }


def test_requests_start_under_the_caps_of_the_answers_and_the_masters_own_outstanding_relays() -> None:
    a = project("p-a", [thread("a-1", "critical", 5), thread("a-2", "urgent", 30), thread("a-3", "watch", 50)])
    b = project("p-b", [thread("b-1", "critical", 9, node="node-2")])
    requests = handoff_requests([a, b])
    schedules = [
        relay_schedule("p-a", running=["a-0"], node_relays={"node-1": 1}, per_node=3, futile={"a-2": "why"}),
        relay_schedule("p-b", node_relays={"node-1": 1, "node-2": 0}, per_node=3),
    ]
    asked = [RelaySlot("p-a", "a-0", "node-1"), RelaySlot("p-x", "x-1", "node-1")]  # a-0 is in the answer already
    decisions = scheduled(requests, schedules, asked)
    assert [(d.slot.thread_id, d.verdict.value) for d in decisions] == [
        ("a-1", "start"),
        ("b-1", "start"),
        ("a-2", "futile"),
        ("a-3", "queued"),
    ]
    assert decisions[3].reason == "node node-1 already runs 3 relays (cap 3)"


def test_without_an_answer_the_default_caps_still_hold() -> None:
    threads = [thread(f"t-{i}", "critical", 5) for i in range(4)]
    decisions = scheduled(handoff_requests([project("p", threads)]), [])
    assert [d.verdict.value for d in decisions] == ["start", "start", "queued", "queued"]
