"""Builders for the project and conversation folds' inputs, and two drivers that route their outputs as the topology
would: `Pipeline` over the pure folds in memory, `Topics` over the batch functions with bytes on every topic and table.
Each test states only what matters to it."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from core.actions import actions_for_level
from core.folds import INDICATORS_FOLD, PROJECTS_FOLD, ROUTES_FOLD
from core.levels import classify_level
from schemas import Conversation, ConversationType, HandoffPackage, Record, ThreadState, WorkFact
from schemas.codec import encode_record
from schemas.projects import (
    ConversationIndicatorState,
    ConversationRelay,
    LiveThread,
    ProjectState,
    TaskImportance,
    ThreadRoutes,
)
from schemas.state import WorkFactState
from schemas.views import ThreadContextSummary
from streams.aggregates import indicators, risk, routes
from streams.aggregates.batch import (
    INDICATOR_CODEC,
    PROJECT_CODEC,
    ROUTES_CODEC,
    indicators_batch,
    projects_batch,
    retire_idle_projects,
    routes_batch,
)
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import (
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    THREAD_STATE_BY_PROJECT,
    Change,
    Emit,
)
from streams.batching import BatchResult, DecodedStates, InputMessage

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


class Pipeline:
    """The three folds with their tables, fed and connected through their internal topics, as the topology would.

    `published` keeps what leaves the pipeline (project-risk, conversation-indicators, client-events) in order.
    """

    def __init__(self) -> None:
        self.routes: dict[str, ThreadRoutes] = {}
        self.projects: dict[str, ProjectState] = {}
        self.conversations: dict[str, ConversationIndicatorState] = {}
        self.published: list[Emit] = []

    def thread(self, state: ThreadState) -> list[Emit]:
        change = routes.route_thread_state(self.routes.get(state.thread_id), state, CONFIG)
        return self._run(self._keep(self.routes, state.thread_id, change), state.updated_at)

    def importance(self, record: TaskImportance) -> list[Emit]:
        change = routes.apply_importance(self.routes.get(record.thread_id), record)
        return self._run(self._keep(self.routes, record.thread_id, change), record.set_at)

    def package(self, package: HandoffPackage) -> list[Emit]:
        change = routes.relay_conversations(self.routes.get(package.from_thread_id), package)
        return self._run(self._keep(self.routes, package.from_thread_id, change), package.created_at)

    def conversation(self, entry: Conversation) -> list[Emit]:
        key = entry.conversation_id
        change = indicators.apply_conversation(self.conversations.get(key), entry)
        return self._run(self._keep(self.conversations, key, change), entry.updated_at)

    def retire(self, now: datetime) -> list[Emit]:
        emits = []
        for key in sorted(self.projects):
            emits += self._keep(self.projects, key, risk.retire_idle(self.projects[key], now, CONFIG))
        return self._run(emits, now)

    def of(self, topic: str) -> list:
        return [e.record for e in self.published if e.topic == topic]

    @staticmethod
    def _keep(table: dict, key: str, change: Change) -> list[Emit]:
        if change.state is not None:
            table[key] = change.state
        return change.emits

    def _run(self, emits: list[Emit], now: datetime) -> list[Emit]:
        queue, out = deque(emits), []
        while queue:
            emit = queue.popleft()
            key = emit.key
            if emit.topic == THREAD_STATE_BY_PROJECT:
                change = risk.apply_project_input(self.projects.get(key), emit.record, now, CONFIG)
                queue += self._keep(self.projects, key, change)
            elif emit.topic == CONVERSATION_THREADS:
                held = self.conversations.get(key)
                if isinstance(emit.record, ConversationRelay):
                    change = indicators.apply_relay(held, emit.record)
                else:
                    change = indicators.apply_shown_thread(held, emit.record.shown)
                queue += self._keep(self.conversations, key, change)
            elif emit.topic == CONVERSATION_LINKS:
                queue += self._keep(self.routes, key, routes.apply_link(self.routes.get(key), emit.record))
            else:
                out.append(emit)
        self.published += out
        return out


class Topics:
    """The three batch functions as the topology runs them: topics as FIFO lists of messages (one partition each),
    tables as bytes. `published` keeps what leaves the folds (outputs and dead letters) in order."""

    def __init__(self, now: datetime, config: ProjectsConfig = CONFIG) -> None:
        self.config = config
        self.topics: dict[str, list[InputMessage]] = defaultdict(list)
        self.offsets: dict[str, int] = defaultdict(int)
        self.published: list[Emit] = []
        self.folds = [
            (ROUTES_FOLD, {}, ROUTES_CODEC, lambda m, load: routes_batch(m, load, now, config, PREFIX)),
            (PROJECTS_FOLD, {}, PROJECT_CODEC, lambda m, load: projects_batch(m, load, now, config, PREFIX)),
            (INDICATORS_FOLD, {}, INDICATOR_CODEC, lambda m, load: indicators_batch(m, load, now, PREFIX)),
        ]
        self.decoded: list[DecodedStates[str, Any]] = [DecodedStates(codec.decode) for _, _, codec, _ in self.folds]
        """As streams.runtime.KeyedFold, each state is decoded once per stored value."""

    def produce(self, topic: str, key: str, value: Record | bytes) -> None:
        raw = value if isinstance(value, bytes) else encode_record(value)
        self.topics[topic].append(InputMessage(topic, 0, self.offsets[topic], key.encode(), raw))
        self.offsets[topic] += 1

    def pending(self) -> list[int]:
        """The folds with records waiting, by index (routes, projects, indicators)."""
        return [i for i, (spec, *_) in enumerate(self.folds) if any(self.topics[t] for t in spec.inputs)]

    def step(self, fold: int, size: int) -> None:
        """One batch of fold `fold`: up to `size` records of each of its inputs (Faust interleaves topics freely)."""
        spec, _, _, batch = self.folds[fold]
        messages = []
        for topic in spec.inputs:
            messages += self.topics[topic][:size]
            del self.topics[topic][:size]
        self._publish(batch(messages, lambda key: self._load(fold, key)), fold)

    def _load(self, fold: int, key: str) -> Any:
        raw = self.folds[fold][1].get(key)
        return None if raw is None else self.decoded[fold].get(key, raw)

    def tick(self, now: datetime) -> None:
        """The project fold's timer."""
        states = ((key, self.decoded[1].get(key, raw)) for key, raw in self.folds[1][1].items())
        self._publish(retire_idle_projects(states, now, self.config), 1)

    def drain(self, size: int = 1_000) -> None:
        while pending := self.pending():
            self.step(pending[0], size)

    def latest(self, topic: str) -> dict[str, Record]:
        """The last record per key (compacted-topic semantics)."""
        return {e.key: e.record for e in self.published if e.topic == topic}

    def _publish(self, result: BatchResult, fold: int) -> None:
        spec = self.folds[fold][0]
        undeclared = {emit.topic for emit in result.emits} - set(spec.outputs)
        assert not undeclared, f"{spec.name} emitted to undeclared {undeclared}"  # the runtime refuses it
        for emit in result.emits:
            if emit.topic in INTERNAL:
                self.produce(emit.topic, emit.key, emit.record)
            else:
                self.published.append(emit)
        table = self.folds[fold][1]
        for key, state in result.states.items():
            raw = table[key] = encode_record(state)
            self.decoded[fold].written(key, raw, state)
