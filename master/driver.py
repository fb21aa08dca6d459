"""The master's rounds over MCP: list the projects, take each one's ranked threads and relay schedule, request the
handoffs the schedule starts in the strategy's order (the rest wait for a free relay, the futile ones are reported
and never asked), and consume the packages whose cycle is over into relay threads.

Who prepares a requested package is a `Responder`: a real worker answers the request (or the `prepare_handoff`
action) by itself, so `ctxbudget master` has none; the benchmark's simulated workers post the package as the worker
would, over HTTP with a worker token. A failed tool call is counted in the round's report and the round goes on: one
thread's error must not stop the master from handling the others.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson
from mcp import ClientSession

from core.relay_schedule import RelaySlot, RelayVerdict
from master.strategy import HandoffRequest, consumable, handoff_requests, relay_thread_id, scheduled

log = logging.getLogger(__name__)

RETRY_ROUNDS = 5
"""Rounds after which a thread still requiring a handoff is asked again."""


class ToolFailed(Exception):
    """A tool answered with an error (the API's status and message)."""


class Responder(Protocol):
    """The worker's part of a handoff request: prepare the thread's package."""

    async def handoff_requested(self, request: HandoffRequest) -> None: ...


class Tools:
    """The MCP tools as calls returning the REST JSON."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments: Any) -> Any:
        result = await self.session.call_tool(name, arguments)
        if getattr(result, "is_error", False):
            text = " ".join(getattr(part, "text", "") for part in getattr(result, "content", []))
            raise ToolFailed(f"{name}: {text}")
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            return structured
        return orjson.loads(result.content[0].text)  # type: ignore[union-attr]


@dataclass
class RoundReport:
    requested: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    """Threads requiring a handoff that wait for a free relay (their node or project is at its cap)."""
    futile: dict[str, str] = field(default_factory=dict)
    """Threads not relayed because a relay would not help, and why."""
    new_subtasks: dict[str, str] = field(default_factory=dict)
    """Per project, where a new subtask goes: a thread id, or `fresh thread`, then why."""
    consumed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class Master:
    tools: Tools
    responder: Responder | None = None
    projects: Collection[str] | None = None
    """Only these projects (None: every project the token sees)."""
    asked: dict[str, tuple[int, RelaySlot]] = field(default_factory=dict)
    """Threads asked for a handoff whose package is not consumed yet: the round they were asked in, their relay."""
    round: int = 0

    async def run_round(self) -> RoundReport:
        self.round += 1
        report = RoundReport()
        listed = await self.tools.call("list_projects")
        ids = [p["project_id"] for p in listed["items"] if self.projects is None or p["project_id"] in self.projects]
        details, schedules = [], []
        for project_id in ids:
            try:
                details.append(await self.tools.call("project_threads", project_id=project_id))
                schedules.append(await self.tools.call("relay_schedule", project_id=project_id))
            except ToolFailed as error:
                report.errors.append(str(error))
        for schedule in schedules:
            target = schedule["new_subtask"]
            report.new_subtasks[schedule["project_id"]] = f"{target['thread_id'] or 'fresh thread'}: {target['reason']}"
        recent = {t: slot for t, (at, slot) in self.asked.items() if self.round - at < RETRY_ROUNDS}
        requests = handoff_requests(details, recent)
        for request, decision in zip(requests, scheduled(requests, schedules, recent.values()), strict=True):
            if decision.verdict is RelayVerdict.START:
                await self._request(request, report)
            elif decision.verdict is RelayVerdict.QUEUED:
                report.queued.append(request.thread_id)
            else:
                report.futile[request.thread_id] = decision.reason
        for thread_id in list(self.asked):
            await self._consume(thread_id, report)
        return report

    async def _request(self, request: HandoffRequest, report: RoundReport) -> None:
        self.asked[request.thread_id] = (self.round, request.slot)
        report.requested.append(request.thread_id)
        try:
            await self.tools.call("request_handoff", thread_id=request.thread_id, reason=request.reason)
        except ToolFailed as error:
            report.errors.append(str(error))
        if self.responder is not None:
            await self.responder.handoff_requested(request)

    async def _consume(self, thread_id: str, report: RoundReport) -> None:
        try:
            budget = await self.tools.call("thread_budget", thread_id=thread_id)
            packages = (await self.tools.call("thread_handoff_packages", thread_id=thread_id))["items"]
            compacted = budget.get("last_compaction_at")
            ready = consumable(
                [p for p in packages if p["from_thread_id"] == thread_id],
                datetime.fromisoformat(compacted) if compacted else None,
            )
            for package in ready:
                await self.tools.call(
                    "consume_handoff_package",
                    package_id=package["handoff_package_id"],
                    to_thread_id=relay_thread_id(package),
                )
                report.consumed.append(package["handoff_package_id"])
            if ready:
                del self.asked[thread_id]
        except ToolFailed as error:
            report.errors.append(str(error))
