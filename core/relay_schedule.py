"""The master schedules relays, not only requests them (issue 37): how many run at once, which wait, which would be
futile, and where new subtasks go. Pure functions over plain facts: the API reads the facts from ClickHouse, the
example master adds the requests it has sent and not seen answered yet.

A relay of a thread runs from the master's handoff request (its package then a draft or ready) to the package consumed
into the relay thread. A worker node (`node_id`) runs at most `per_node` relays at once, a project at most
`per_project`: a wrap-up costs the agent turns and the node's tokens, and a burst of them at once starves the work the
relays protect. Threads over a cap wait in the order they came in, the spec 8.1 order of the project view.

A relay is futile when the relay thread would start where the old one stopped: the thread asking for one is itself a
relay whose first report was already below the watch threshold (its package or its first input filled the window),
or the same work (the thread, or its task) was relayed less than `repeat_seconds` ago. The master is told so instead
of relaying again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from schemas import ContextBudgetLevel
from schemas.views import ThreadContextSummary

DEFAULT_PER_NODE = 2
DEFAULT_PER_PROJECT = 4
DEFAULT_REPEAT_SECONDS = 600.0


class RelayVerdict(StrEnum):
    START = "start"
    QUEUED = "queued"
    FUTILE = "futile"


@dataclass(frozen=True)
class RelayLimits:
    per_node: int = DEFAULT_PER_NODE
    per_project: int = DEFAULT_PER_PROJECT
    repeat_seconds: float = DEFAULT_REPEAT_SECONDS


@dataclass(frozen=True)
class RelaySlot:
    """A thread's relay and where it runs."""

    project_id: str
    thread_id: str
    node_id: str


@dataclass(frozen=True)
class RelayLoad:
    """Relays running now, per worker node and per project."""

    by_node: Mapping[str, int]
    by_project: Mapping[str, int]

    @classmethod
    def of(cls, running: Iterable[RelaySlot]) -> RelayLoad:
        slots = list(running)
        return cls(Counter(s.node_id for s in slots), Counter(s.project_id for s in slots))

    def plus(self, running: Iterable[RelaySlot]) -> RelayLoad:
        """These relays counted too."""
        more = RelayLoad.of(running)
        return RelayLoad(
            Counter(self.by_node) + Counter(more.by_node), Counter(self.by_project) + Counter(more.by_project)
        )

    def merged(self, other: RelayLoad) -> RelayLoad:
        """Each count the larger of the two: two views of the same relays, one of them fresher."""
        return RelayLoad(_larger(self.by_node, other.by_node), _larger(self.by_project, other.by_project))


@dataclass(frozen=True)
class RelayDecision:
    slot: RelaySlot
    verdict: RelayVerdict
    reason: str
    queue_position: int | None = None
    """1 for the first thread waiting for a free relay (of all the projects scheduled together)."""


@dataclass(frozen=True)
class RelayHistory:
    """What a thread's past relays say about the next one."""

    relayed_at: datetime | None = None
    """The latest consume of a package of the same work: handed off by the thread, into it, or of its task."""
    first_remaining_pct: float | None = None
    """The thread's first reported percent after a package was consumed into it (None: it is no relay thread, or it
    has not reported since)."""


def futile_reason(history: RelayHistory, safe_min_pct: float, now: datetime, repeat_seconds: float) -> str | None:
    """Why relaying the thread's work again would not help, or None when a relay may."""
    first = history.first_remaining_pct
    if first is not None and first < safe_min_pct:
        return (
            f"its relay started at {first:.0f}% left, already below the watch threshold ({safe_min_pct:.0f}%): the "
            "package or the first input is too big; shrink it (or split the work) instead of relaying again"
        )
    if history.relayed_at is not None:
        since = (now - history.relayed_at).total_seconds()  # whole seconds shown down: 59.6 s is not "60 s ago"
        if since < repeat_seconds:
            return (
                f"the same work was relayed {int(since)} s ago (less than {repeat_seconds:g} s): relaying it again "
                "would repeat the last relay; narrow the task or split it instead"
            )
    return None


def schedule_relays(
    wanting: Sequence[RelaySlot], load: RelayLoad, limits: RelayLimits, futile: Mapping[str, str] | None = None
) -> list[RelayDecision]:
    """A verdict for each thread wanting a relay, in the order given (most pressing first, spec 8.1): futile ones
    (`futile`: thread id -> why) are refused, the others start while their node and project have room, else wait."""
    refused = futile or {}
    nodes, projects = Counter(load.by_node), Counter(load.by_project)
    decisions: list[RelayDecision] = []
    waiting = 0
    for slot in wanting:
        if slot.thread_id in refused:
            decisions.append(RelayDecision(slot, RelayVerdict.FUTILE, refused[slot.thread_id]))
            continue
        full = _full(slot, nodes, projects, limits)
        if full:
            waiting += 1
            decisions.append(RelayDecision(slot, RelayVerdict.QUEUED, full, waiting))
            continue
        nodes[slot.node_id] += 1
        projects[slot.project_id] += 1
        reason = f"node {slot.node_id} runs {nodes[slot.node_id]}/{limits.per_node} relays, project {slot.project_id}"
        decisions.append(
            RelayDecision(slot, RelayVerdict.START, f"{reason} {projects[slot.project_id]}/{limits.per_project}")
        )
    return decisions


def _full(slot: RelaySlot, nodes: Counter[str], projects: Counter[str], limits: RelayLimits) -> str:
    if nodes[slot.node_id] >= limits.per_node:
        return f"node {slot.node_id} already runs {nodes[slot.node_id]} relays (cap {limits.per_node})"
    if projects[slot.project_id] >= limits.per_project:
        return f"project {slot.project_id} already runs {projects[slot.project_id]} relays (cap {limits.per_project})"
    return ""


def _larger(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {key: max(a.get(key, 0), b.get(key, 0)) for key in {*a, *b}}


@dataclass(frozen=True)
class SubtaskPlacement:
    """Where the master should put a new subtask (spec 8.2.4): a thread, or None for a fresh one, and why."""

    thread_id: str | None
    reason: str


def takes_new_work(thread: ThreadContextSummary) -> bool:
    """Spec 8.2.3-4: a safe, fresh thread with no work to save first may take a new subtask."""
    return (
        thread.context_budget_level is ContextBudgetLevel.SAFE
        and not thread.stale
        and not thread.must_finish_before_compaction
    )


def place_subtask(threads: Iterable[ThreadContextSummary], relaying: Iterable[str] = ()) -> SubtaskPlacement:
    """The healthiest thread free for new work, else a fresh thread. Only safe threads take new work: watch and
    urgent ones should not take long new context (spec 8.2.3), and a thread whose relay runs is wrapping up."""
    busy = set(relaying)
    shown = list(threads)
    free = [t for t in shown if takes_new_work(t) and t.thread_id not in busy]
    best = min(free, key=lambda t: (-t.context_budget_remaining_pct, t.thread_id), default=None)
    if best is not None:
        return SubtaskPlacement(
            best.thread_id,
            f"safe with {best.context_budget_remaining_pct:.0f}% left, the most room of {len(free)} free safe "
            f"thread{'s' if len(free) > 1 else ''}",
        )
    levels = Counter(t.context_budget_level.value for t in shown if t.thread_id not in busy)
    held = ", ".join(f"{n} {level}" for level, n in sorted(levels.items())) or "no threads"
    relays = f"; {len(busy & {t.thread_id for t in shown})} relaying" if busy else ""
    return SubtaskPlacement(None, f"no free safe thread ({held}{relays}): start a fresh thread")
