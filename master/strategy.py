"""What the master does given the project JSON the MCP tools return (spec 8.2): whose handoff to request, in which
order, and which ready packages to hand to a relay thread. Pure functions of the REST JSON, no I/O.

Order (8.2 points 1-2): critical threads first, then urgent, then watch (whose level already asks to start preparing
the package, 4.1); within a level must-finish work first, then the project's own rank order, which already puts an
uncommitted patch, unrecorded test results and a hardware step in progress first (streams/aggregates/ranking.py).

A package is consumed into its relay thread once its thread compacted past it: the cycle it prepared is over and the
relay continues the work. Consuming it earlier would leave the thread without a ready package at its compaction.

The requests are scheduled (issue 37, core/relay_schedule.py): each project's `relay_schedule` answer gives the caps,
the relays running and the futile ones; the master adds the relays it asked for that the answers do not show yet, so
a round never starts more than the caps allow, and asks only the threads whose verdict is `start`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.relay_schedule import RelayDecision, RelayLimits, RelayLoad, RelaySlot, schedule_relays

Json = Mapping[str, Any]

LEVEL_ORDER = {"critical": 0, "urgent": 1, "watch": 2}
"""Levels whose threads the master asks for a handoff, most pressing first."""
RELAY_PREFIX = "relay-"
MAX_ID_LENGTH = 128


@dataclass(frozen=True)
class HandoffRequest:
    project_id: str
    thread_id: str
    level: str
    reason: str
    node_id: str

    @property
    def slot(self) -> RelaySlot:
        return RelaySlot(self.project_id, self.thread_id, self.node_id)


def handoff_requests(projects: Iterable[Json], asked: Iterable[str] = ()) -> list[HandoffRequest]:
    """The handoffs to request this round, over all projects, most pressing first: the threads each project says
    require one (`threads_requiring_handoff`), fresh, at watch or worse, and not already asked (`asked`)."""
    skip = set(asked)
    found: list[tuple[tuple[int, bool, int], HandoffRequest]] = []
    for project in projects:
        requiring = set(project.get("threads_requiring_handoff", ()))
        for rank, thread in enumerate(project.get("active_thread_contexts", ())):
            level = thread["context_budget_level"]
            thread_id = thread["thread_id"]
            if thread_id not in requiring or thread_id in skip or level not in LEVEL_ORDER or thread.get("stale"):
                continue
            must_finish = bool(thread.get("must_finish_before_compaction"))
            reason = f"{level}: {thread['context_budget_remaining_pct']:.0f}% left" + (
                ", unsaved work to save first" if must_finish else ""
            )
            request = HandoffRequest(project["project_id"], thread_id, level, reason, thread["node_id"])
            found.append(((LEVEL_ORDER[level], not must_finish, rank), request))
    return [request for _, request in sorted(found, key=lambda item: item[0])]


def scheduled(
    requests: Sequence[HandoffRequest], schedules: Iterable[Json], outstanding: Iterable[RelaySlot] = ()
) -> list[RelayDecision]:
    """A verdict for each request, in their order, under the caps of the `relay_schedule` answers: the relays those
    answers show running, plus the `outstanding` ones (asked, not consumed) they do not show yet."""
    answers = list(schedules)
    running = {thread_id for answer in answers for thread_id in answer["running"]}
    load = RelayLoad({}, {})
    for answer in answers:  # each answer counts a node's relays over every project: the same relays, maybe fresher
        load = load.merged(RelayLoad(answer["node_relays"], {answer["project_id"]: len(answer["running"])}))
    load = load.plus(slot for slot in outstanding if slot.thread_id not in running)
    futile = {e["thread_id"]: e["reason"] for answer in answers for e in answer["relays"] if e["verdict"] == "futile"}
    caps = answers[0]["limits"] if answers else None
    limits = RelayLimits(caps["per_node"], caps["per_project"], caps["repeat_seconds"]) if caps else RelayLimits()
    return schedule_relays([r.slot for r in requests], load, limits, futile)


def consumable(packages: Sequence[Json], last_compaction_at: datetime | None) -> list[Json]:
    """The thread's ready packages whose cycle is over (made before its last compaction), oldest first."""
    if last_compaction_at is None:
        return []
    ready = [
        p
        for p in packages
        if p["package_status"] == "ready" and datetime.fromisoformat(p["created_at"]) < last_compaction_at
    ]
    return sorted(ready, key=lambda p: p["created_at"])


def relay_thread_id(package: Json) -> str:
    """The relay thread that continues a package's work (an id of the contract: at most 128 characters)."""
    return (RELAY_PREFIX + package["handoff_package_id"])[:MAX_ID_LENGTH]
