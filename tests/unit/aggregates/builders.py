"""Builders for the project and conversation folds' inputs, and the aggregates role run by the in-memory runtime from
the topology's own declaration (`aggregates`, and `Feed` for one input at a time), behind the routing that the
engine's fold runs, fed thread states directly (`ROUTING`). Each test states only what matters to it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from core.actions import actions_for_level
from core.folds import ENGINE_FOLD, PROJECTS_FOLD
from core.folds import ROUTING as ROUTING_PROCESSOR
from core.levels import classify_level
from core.settings import Settings
from core.topics import CONVERSATIONS, HANDOFF_PACKAGES, TASK_IMPORTANCE, THREAD_STATE
from schemas import Codec, Conversation, ConversationType, HandoffPackage, Record, ThreadState, WorkFact
from schemas.projects import LiveThread, ProjectState, TaskImportance, ThreadRoutes
from schemas.state import WorkFactState
from schemas.views import ThreadContextSummary
from streams.aggregates import routes
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import CONVERSATION_LINKS, CONVERSATION_THREADS, THREAD_STATE_BY_PROJECT, Emit
from streams.batching import BatchResult, InputMessage, fold_records
from streams.engine.routing import ROUTING_DECODERS
from streams.runtime.memory import MemoryRuntime
from streams.topology import wire

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
CONFIG = ProjectsConfig()
PREFIX = "ctx."
VISIBLE_CHANGES = [
    ("ring percent", {"pct": 51.9}),
    ("level", {"pct": 39.0}),
    ("must-finish", {"must_finish": True}),
    ("expected compaction minute", {"expected_at": 660}),
    ("staleness", {"stale": True}),
    ("node", {"node": "win-02"}),
]
"""Changes a project view shows, as `thread_state` arguments, from a thread at 52.9% expecting compaction at 600 s."""
INTERNAL = (THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS, CONVERSATION_LINKS)
ROUTING = ENGINE_FOLD.alone(ROUTING_PROCESSOR)
"""The routing step of the engine's fold chain (`core.folds.ROUTING`) as a fold of its own, fed thread states."""
ROUTING_CODECS = {**ROUTING_DECODERS, THREAD_STATE: Codec(ThreadState), HANDOFF_PACKAGES: Codec(HandoffPackage)}
ROUTES_CODEC = Codec(ThreadRoutes)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def thread_state(
    thread: str = "thread-a",
    pct: float = 80.0,
    *,
    project: str = "proj-1",
    seconds: float = 0,
    facts: Iterable[WorkFact] = (),
    must_finish: bool | None = None,
    expected_at: float | None = None,
    stale: bool = False,
    node: str = "mac-01",
    handoff_ready: bool = False,
) -> ThreadState:
    level = classify_level(pct)
    work_facts = [WorkFactState(fact=f, active=True, changed_at=at(seconds)) for f in facts]
    handoff = (
        HandoffPackage(
            handoff_package_id=f"hp-{thread}",
            project_id=project,
            from_thread_id=thread,
            package_status="ready",
            created_at=at(seconds),
            ready_at=at(seconds),
            summary_text="state of work",
            critical_files=["a.py"],
            critical_commands=["make"],
            critical_tests=["t::x"],
        )
        if handoff_ready
        else None
    )
    return ThreadState(
        thread_id=thread,
        project_id=project,
        node_id=node,
        worker_id=f"worker-{node}",
        source_kind="codex_app_server",
        snapshot_id=f"{thread}-{seconds}",
        snapshot_version=int(seconds * 1000),
        captured_at=at(seconds),
        context_budget_remaining_pct=pct,
        reported_level=level,
        context_budget_level=level,
        compaction_expected_at=at(expected_at) if expected_at is not None else None,
        work_facts=work_facts,
        must_finish_before_compaction=bool(work_facts) if must_finish is None else must_finish,
        next_required_report_in_seconds=5,
        report_deadline_at=at(seconds + 15),
        stale=stale,
        due_actions=actions_for_level(level),
        handoff=handoff,
        updated_at=at(seconds),
    )


def conversation(
    conversation_id: str,
    kind: ConversationType,
    threads: list[str],
    *,
    project: str = "proj-1",
    seconds: float = 0,
    pinned: bool = False,
) -> Conversation:
    return Conversation(
        conversation_id=conversation_id,
        conversation_type=kind,
        project_id=project,
        project_title=f"title of {project}",
        thread_ids=threads,
        manual_pinned=pinned,
        updated_at=at(seconds),
    )


def live(
    thread: str,
    level_pct: float = 80.0,
    *,
    must_finish: bool = False,
    facts: Iterable[WorkFact] = (),
    expected_at: float | None = None,
    importance: int | None = None,
    stale: bool = False,
) -> LiveThread:
    return LiveThread(
        summary=ThreadContextSummary(
            thread_id=thread,
            node_id="mac-01",
            context_budget_remaining_pct=level_pct,
            context_budget_level=classify_level(level_pct),
            must_finish_before_compaction=must_finish,
            compaction_expected_at=at(expected_at) if expected_at is not None else None,
            stale=stale,
            updated_at=T0,
        ),
        active_facts=sorted(set(facts)),
        task_importance=importance,
    )


def importance(thread: str, value: int, *, seconds: float = 0, project: str = "proj-1") -> TaskImportance:
    return TaskImportance(
        thread_id=thread, project_id=project, task_importance=value, set_by="master", set_at=at(seconds)
    )


def aggregates(now: datetime = T0, config: ProjectsConfig = CONFIG) -> MemoryRuntime:
    """The aggregates role as the topology declares it (`streams.topology.wire`), in the in-memory runtime: topics
    as lists of bytes records (one partition each), tables as bytes, every fold's outputs delivered to its readers.
    Batches are folded at `now` (see `Feed` for a feed at each record's own time)."""
    retire_after = config.retire_after.total_seconds()
    settings = Settings(roles="aggregates", topic_prefix=PREFIX, project_retire_seconds=retire_after)
    runtime = MemoryRuntime(settings, now)
    runtime.keyed_fold(ROUTING, ROUTES_CODEC.decode, batch=lambda m, load, now: routing_batch(m, load, now, config))
    wire(runtime, settings)
    return runtime


def routing_batch(
    messages: Iterable[InputMessage], load: Any, now: datetime, config: ProjectsConfig
) -> BatchResult[ThreadRoutes]:
    return fold_records(
        messages,
        load,
        ROUTING_CODECS,
        key_of=lambda record: record.from_thread_id if isinstance(record, HandoffPackage) else record.thread_id,
        apply=lambda state, record, _logged_at: routes.route(state, record, config),
        now=now,
        prefix=PREFIX,
    )


class Feed:
    """One input at a time into the aggregates role (`aggregates`), each folded at its own time and drained before the
    next one: the records a project view or conversation ring would show after each input.

    `published` keeps what leaves the role (project-risk, conversation-indicators, conversations, client-events,
    dead letters) in order; the records between its folds stay on their topics."""

    def __init__(self) -> None:
        self.runtime = aggregates()

    def thread(self, state: ThreadState) -> list[Emit]:
        return self._feed(THREAD_STATE, state.thread_id, state, state.updated_at)

    def importance(self, record: TaskImportance) -> list[Emit]:
        return self._feed(TASK_IMPORTANCE, record.thread_id, record, record.set_at)

    def package(self, package: HandoffPackage) -> list[Emit]:
        return self._feed(HANDOFF_PACKAGES, package.from_thread_id, package, package.created_at)

    def conversation(self, entry: Conversation) -> list[Emit]:
        return self._feed(CONVERSATIONS, entry.conversation_id, entry, entry.updated_at)

    def retire(self, now: datetime) -> list[Emit]:
        """The project fold's timer at `now`, and what follows from it."""
        before = len(self.runtime.published)
        self.runtime.tick(now)
        self.runtime.drain()
        return self._out(self.runtime.published[before:])

    @property
    def published(self) -> list[Emit]:
        return self._out(self.runtime.published)

    def of(self, topic: str) -> list:
        return [e.record for e in self.published if e.topic == topic]

    def routes(self, thread_id: str) -> ThreadRoutes | None:
        """The routing's state of a thread."""
        return self.runtime.state(ROUTING.name, thread_id)

    @property
    def projects(self) -> dict[str, ProjectState]:
        """The project fold's table, decoded."""
        return {key: self.runtime.state(PROJECTS_FOLD.name, key) for key in self.runtime.tables[PROJECTS_FOLD.name]}

    def _feed(self, topic: str, key: str, record: Record, now: datetime) -> list[Emit]:
        before = len(self.runtime.published)
        self.runtime.now = now
        self.runtime.produce(topic, key, record)
        self.runtime.drain()
        return self._out(self.runtime.published[before:])

    @staticmethod
    def _out(emits: list[Emit]) -> list[Emit]:
        return [e for e in emits if e.topic not in INTERNAL]
