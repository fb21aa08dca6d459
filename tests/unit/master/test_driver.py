"""The master's rounds against fake tools: requests in the strategy's order with the responder told of each, a
failed tool counted without stopping the round, a package consumed once its thread compacted, a thread asked again
only after RETRY_ROUNDS rounds."""

from __future__ import annotations

from typing import Any

from master.driver import RETRY_ROUNDS, Master, ToolFailed
from master.strategy import HandoffRequest
from tests.unit.master.test_strategy import package, project, thread


class FakeTools:
    def __init__(self, projects: dict[str, dict], fail: set[str] = frozenset()) -> None:
        self.projects = projects
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.budgets: dict[str, dict] = {}
        self.packages: dict[str, list[dict]] = {}

    async def call(self, name: str, **arguments: Any) -> Any:
        self.calls.append((name, arguments))
        if name in self.fail:
            raise ToolFailed(f"{name}: 404: not found")
        if name == "list_projects":
            return {"items": [{"project_id": p} for p in self.projects]}
        if name == "project_threads":
            return self.projects[arguments["project_id"]]
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
        "p-a": project("p-a", [thread("a-urgent", "urgent", 35)]),
        "p-b": project("p-b", [thread("b-critical", "critical", 8)]),
        "p-c": project("p-c", [thread("c-critical", "critical", 6)]),
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
