"""The master's rounds against fake tools: requests in the strategy's order with the responder told of each, a
failed tool counted without stopping the round, a package consumed once its thread compacted, a thread asked again
only after RETRY_ROUNDS rounds; relays started under the caps, the rest queued, the futile ones never asked."""

from __future__ import annotations

from typing import Any

from master.driver import RETRY_ROUNDS, Master, ToolFailed
from master.strategy import HandoffRequest
from tests.unit.master.test_strategy import package, project, relay_schedule, thread


class FakeTools:
    def __init__(self, projects: dict[str, dict], fail: set[str] = frozenset()) -> None:
        self.projects = projects
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.budgets: dict[str, dict] = {}
        self.packages: dict[str, list[dict]] = {}
        self.schedules: dict[str, dict] = {}

    async def call(self, name: str, **arguments: Any) -> Any:
        self.calls.append((name, arguments))
        if name in self.fail:
            raise ToolFailed(f"{name}: 404: not found")
        if name == "list_projects":
            return {"items": [{"project_id": p} for p in self.projects]}
        if name == "project_threads":
            return self.projects[arguments["project_id"]]
        if name == "relay_schedule":
            project_id = arguments["project_id"]
            return self.schedules.get(project_id) or relay_schedule(project_id)
        if name == "thread_budget":
            return self.budgets.get(arguments["thread_id"], {})
        if name == "thread_handoff_packages":
            return {"items": self.packages.get(arguments["thread_id"], [])}
        return {"accepted": True}

    def named(self, name: str) -> list[dict[str, Any]]:
        return [arguments for called, arguments in self.calls if called == name]


class Recorder:
    def __init__(self) -> None:
        self.requests: list[HandoffRequest] = []

    async def handoff_requested(self, request: HandoffRequest) -> None:
        self.requests.append(request)


def fleet() -> dict[str, dict]:
    return {
        "p-a": project("p-a", [thread("a-urgent", "urgent", 35, node="node-a")]),
        "p-b": project("p-b", [thread("b-critical", "critical", 8, node="node-b")]),
        "p-c": project("p-c", [thread("c-critical", "critical", 6, node="node-c")]),
    }


async def test_a_round_requests_in_priority_order_within_the_chosen_projects_and_tells_the_responder() -> None:
    tools, responder = FakeTools(fleet()), Recorder()
    master = Master(tools, responder, projects={"p-a", "p-b"})  # type: ignore[arg-type]
    report = await master.run_round()
    assert report.requested == ["b-critical", "a-urgent"]
    assert [a["thread_id"] for a in tools.named("request_handoff")] == ["b-critical", "a-urgent"]
    assert [r.thread_id for r in responder.requests] == ["b-critical", "a-urgent"]
    assert {a["project_id"] for a in tools.named("project_threads")} == {"p-a", "p-b"}


async def test_a_failed_request_is_reported_and_the_responder_still_prepares_the_package() -> None:
    tools, responder = FakeTools(fleet(), fail={"request_handoff"}), Recorder()
    report = await Master(tools, responder).run_round()  # type: ignore[arg-type]
    assert len(report.errors) == 3
    assert report.errors[0].startswith("request_handoff: 404")
    assert len(responder.requests) == 3


async def test_a_package_is_consumed_into_its_relay_once_the_thread_compacted_and_then_forgotten() -> None:
    tools = FakeTools({"p-b": fleet()["p-b"]})
    master = Master(tools)  # type: ignore[arg-type]
    await master.run_round()
    hp = package("hp-b", "ready", 10) | {"from_thread_id": "b-critical"}
    tools.packages["b-critical"] = [hp]
    assert (await master.run_round()).consumed == []  # not compacted yet
    tools.budgets["b-critical"] = {"last_compaction_at": "2026-12-01T08:00:30+00:00"}
    report = await master.run_round()
    assert report.consumed == ["hp-b"]
    assert tools.named("consume_handoff_package") == [{"package_id": "hp-b", "to_thread_id": "relay-hp-b"}]
    assert "b-critical" not in master.asked


async def test_a_thread_still_requiring_a_handoff_is_asked_again_only_after_the_retry_rounds() -> None:
    tools = FakeTools({"p-b": fleet()["p-b"]})
    master = Master(tools)  # type: ignore[arg-type]
    asked = [bool((await master.run_round()).requested) for _ in range(RETRY_ROUNDS + 1)]
    assert asked == [True] + [False] * (RETRY_ROUNDS - 1) + [True]


async def test_over_the_cap_the_less_pressing_wait_and_a_futile_relay_is_reported_not_asked() -> None:
    threads = [thread("t-1", "critical", 5), thread("t-2", "critical", 8), thread("t-3", "urgent", 30)]
    tools = FakeTools({"p": project("p", [*threads, thread("t-4", "watch", 50)])})
    tools.schedules["p"] = relay_schedule("p", per_node=2, futile={"t-2": "the same work was relayed 90 s ago"})
    master = Master(tools)  # type: ignore[arg-type]
    report = await master.run_round()
    assert report.requested == ["t-1", "t-3"]
    assert report.queued == ["t-4"]
    assert report.futile == {"t-2": "the same work was relayed 90 s ago"}
    assert report.new_subtasks == {"p": "fresh thread: no free safe thread (1 critical): start a fresh thread"}
    # the next round: its two relays still run (the answer does not show them yet), so t-4 keeps waiting
    again = await master.run_round()
    assert (again.requested, again.queued) == ([], ["t-4"])
