"""Deterministic fleet traffic: agent threads burning context budget, compacting, and handing work off.

The pipeline must be exercised and demonstrated before real workers feed it, and its tests need input shaped like a
fleet's: many threads across projects, budgets that shrink turn by turn and recover after each compaction, work facts,
handoff packages, two snapshot sources, and the imperfections of real producers (late, duplicate and invalid records).
Everything derives from one seed, so a run replays byte for byte; live traffic (`clock` set) takes its times from the
wall clock instead, so what it reports never lies in the future. `registry` is the home list that shows the fleet, as
a deployment registers it.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from random import Random
from typing import Any, Literal

from aiokafka import AIOKafkaProducer

from core.levels import classify_level  # workers report with the spec's default thresholds
from core.topics import HANDOFF_PACKAGES, SESSION_EVENTS, SNAPSHOTS
from schemas import (
    SESSION_EVENT_ADAPTER,
    Codec,
    CompactionCompleted,
    CompactionStarted,
    ContextBudgetLevel,
    Conversation,
    ConversationType,
    HandoffPackage,
    PackageStatus,
    SourceKind,
    ThreadContextSnapshot,
    TriggerMode,
    WorkFact,
    WorkFactChanged,
)
from streams.aggregates.batch import CONVERSATIONS

RecordKind = Literal["valid", "duplicate", "late", "invalid"]

_SNAPSHOT_CODEC = Codec(ThreadContextSnapshot)
_EVENT_CODEC = Codec(SESSION_EVENT_ADAPTER)
_PACKAGE_CODEC = Codec(HandoffPackage)
_CONVERSATION_CODEC = Codec(Conversation)

_PRIMARY_SOURCES = (SourceKind.CODEX_APP_SERVER, SourceKind.CODEX_SDK, SourceKind.WORKER_ESTIMATOR)
_PRIMARY_WEIGHTS = (5, 3, 2)
_MODULES = ("torque", "fixture", "scheduler", "telemetry", "firmware", "calibration", "report", "gateway")
_FILE_FACTS = (WorkFact.UNCOMMITTED_PATCH, WorkFact.UNRECORDED_TEST_RESULTS)
_PACKAGE_STAGES = (PackageStatus.DRAFT, PackageStatus.READY, PackageStatus.CONSUMED)
_THREADS_PER_MACHINE = 4
_WINDOW_TOKENS = 272_000
_LATE_HISTORY = 5
"""A late record re-sends one of the thread's last few snapshots (never the newest)."""
_MAX_ACTIVE_FACTS = 2
_FACT_START_RATE = 0.15
_FACT_RESOLVE_RATE = 0.2
_SPIKE_RATE = 0.1
"""Chance per turn of a large message or tool result that burns three times the usual budget."""
_ESTIMATOR_NOISE_PCT = 6.0
_MAX_PENDING_SENDS = 10_000


@dataclass(frozen=True)
class SimulationConfig:
    """Size of the fleet, its clock, and its imperfections.

    duplicate, late and invalid rates are chances per primary snapshot of an extra record of that kind; mismatch_rate
    is the chance per snapshot that the reported level is deliberately wrong.
    """

    threads: int = 20
    projects: int = 3
    turns_per_thread: int = 40
    seed: int = 0
    start: datetime = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
    turn_seconds: float = 20.0
    duplicate_rate: float = 0.02
    late_rate: float = 0.02
    invalid_rate: float = 0.01
    mismatch_rate: float = 0.02
    estimator_rate: float = 0.1
    """Chance per turn that a thread with a Codex primary source also gets a worker_estimator snapshot."""
    clock: Callable[[], datetime] | None = None
    """Live traffic: each turn happens at the clock's time (past `start`), not at start + turns x turn_seconds."""
    self_handoff: bool = True
    """Threads post their own handoff packages (draft at urgent, ready at critical and before compacting, consumed
    after). False: a thread posts none, so only a master's requests answered for it (bench/fleet_relay.py) do."""

    def __post_init__(self) -> None:
        if self.threads < 1 or self.projects < 1 or self.turns_per_thread < 0:
            raise ValueError("threads and projects must be at least 1, turns_per_thread at least 0")
        if self.start.tzinfo is None or self.turn_seconds <= 0:
            raise ValueError("start must be timezone-aware and turn_seconds positive")
        for item in fields(self):
            if item.name.endswith("_rate") and not 0 <= getattr(self, item.name) <= 1:
                raise ValueError(f"{item.name} must be within [0, 1]")


@dataclass(frozen=True)
class SimRecord:
    """One Kafka record: unprefixed topic, key, value bytes, and what the simulator meant it to be."""

    topic: str
    key: bytes
    value: bytes
    kind: RecordKind


@dataclass
class _Thread:
    thread_id: str
    project_id: str
    task_id: str
    node_id: str
    worker_id: str
    source: SourceKind
    modules: list[str]
    phase: float
    """Where the thread's turns fall inside the fleet's turn, as a fraction of turn_seconds."""
    burn: float
    """Mean budget points the thread loses per turn."""
    burn_estimate: float
    """The worker's running estimate of `burn`, from which it forecasts compaction."""
    pct: float
    compaction_floor: float
    """The budget at or below which the thread compacts next; redrawn after each compaction."""
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    last_turn_at: datetime | None = None
    versions: dict[SourceKind, int] = field(default_factory=dict)
    facts: dict[WorkFact, list[str]] = field(default_factory=dict)
    """Active work facts (insertion-ordered, so iteration is deterministic) and the files each involves."""
    package: HandoffPackage | None = None
    events: int = 0
    sent: deque[bytes] = field(default_factory=lambda: deque(maxlen=_LATE_HISTORY))

    @property
    def key(self) -> bytes:
        return self.thread_id.encode()

    @property
    def files(self) -> list[str]:
        return [f"src/{module}.py" for module in self.modules]


def _thread_id(index: int) -> str:
    return f"thread-{index:04d}"


def worker_id_of(thread_id: str) -> str:
    """The simulated worker that runs a thread of the fleet (threads share a machine in fours)."""
    return f"worker-{int(thread_id.removeprefix('thread-')) // _THREADS_PER_MACHINE:02d}"


def _project_id(thread_index: int, projects: int) -> str:
    return f"proj-{thread_index % projects:03d}"


def _tokens_used(pct: float) -> int:
    return int(_WINDOW_TOKENS * (100 - pct) / 100)


def _revise(package: HandoffPackage, **changes: Any) -> HandoffPackage:
    """A new version of a package, validated like any other."""
    return HandoffPackage.model_validate(package.model_dump() | changes)


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def _truncated(body: dict[str, Any]) -> bytes:
    encoded = _dumps(body)
    return encoded[: len(encoded) // 2]


def _pct_as_string(body: dict[str, Any]) -> bytes:
    return _dumps(body | {"context_budget_remaining_pct": str(int(body["context_budget_remaining_pct"]))})


def _naive_timestamp(body: dict[str, Any]) -> bytes:
    naive = datetime.fromisoformat(body["captured_at"]).replace(tzinfo=None)
    return _dumps(body | {"captured_at": naive.isoformat()})


def _unknown_level(body: dict[str, Any]) -> bytes:
    return _dumps(body | {"context_budget_level": "orange"})


def _missing_thread_id(body: dict[str, Any]) -> bytes:
    return _dumps({name: value for name, value in body.items() if name != "thread_id"})


def _pct_out_of_range(body: dict[str, Any]) -> bytes:
    return _dumps(body | {"context_budget_remaining_pct": 150.0})


_CORRUPTIONS: tuple[Callable[[dict[str, Any]], bytes], ...] = (
    _truncated,
    _pct_as_string,
    _naive_timestamp,
    _unknown_level,
    _missing_thread_id,
    _pct_out_of_range,
)
"""Ways a producer gets a snapshot wrong; each takes the snapshot's JSON body and returns bytes no codec accepts."""


def _event_record(event: CompactionStarted | CompactionCompleted | WorkFactChanged) -> SimRecord:
    return SimRecord(SESSION_EVENTS, event.thread_id.encode(), _EVENT_CODEC.encode(event), "valid")


class _Fleet:
    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.rng = Random(config.seed)
        self.start = config.start.astimezone(UTC)
        self.threads = [self._new_thread(index) for index in range(config.threads)]

    def run(self) -> Iterator[SimRecord]:
        for turn in range(self.config.turns_per_thread):
            times = [(self._turn_time(thread, turn), index) for index, thread in enumerate(self.threads)]
            for now, index in sorted(times):
                yield from self._turn(self.threads[index], now)

    def _new_thread(self, index: int) -> _Thread:
        rng = self.rng
        machine = index // _THREADS_PER_MACHINE
        burn = rng.uniform(1.5, 4.0)
        return _Thread(
            thread_id=_thread_id(index),
            project_id=_project_id(index, self.config.projects),
            task_id=f"task-{index:04d}",
            node_id=f"node-{machine:02d}",
            worker_id=worker_id_of(_thread_id(index)),
            source=rng.choices(_PRIMARY_SOURCES, weights=_PRIMARY_WEIGHTS)[0],
            modules=rng.sample(_MODULES, 3),
            phase=rng.uniform(0, 0.6),
            burn=burn,
            burn_estimate=burn,
            pct=rng.uniform(30, 100),
            compaction_floor=rng.uniform(2, 10),
        )

    def _turn_time(self, thread: _Thread, turn: int) -> datetime:
        """Consecutive turns of one thread are at least 0.6 turn apart; threads interleave with jitter."""
        offset = turn + thread.phase + self.rng.uniform(0, 0.4)
        if self.config.clock is not None:
            return max(self.config.clock().astimezone(UTC), self.start)
        return self.start + timedelta(seconds=offset * self.config.turn_seconds)

    def _before(self, thread: _Thread, now: datetime, turns: float) -> datetime:
        """`turns` of a turn before `now`; live, a turn is however long the thread's last one really took."""
        turn = timedelta(seconds=self.config.turn_seconds)
        if self.config.clock is not None:
            turn = min(turn, now - (thread.last_turn_at or now - turn))
        return now - turns * turn

    def _turn(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        yield from self._turn_records(thread, now)
        thread.last_turn_at = now

    def _turn_records(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        yield from self._burn(thread, now)
        yield from self._facts(thread, now)
        if self.config.self_handoff:
            yield from self._own_package(thread, now)
        yield from self._snapshots(thread, now)

    def _own_package(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        level = classify_level(thread.pct)
        if level is ContextBudgetLevel.CRITICAL:
            yield from self._package_to(thread, PackageStatus.READY, now)
        elif level is ContextBudgetLevel.URGENT:
            yield from self._package_to(thread, PackageStatus.DRAFT, now)

    def _burn(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        spike = 3.0 if self.rng.random() < _SPIKE_RATE else 1.0
        drop = thread.burn * self.rng.uniform(0.3, 1.7) * spike
        if thread.pct - drop > thread.compaction_floor:
            thread.pct -= drop
            thread.burn_estimate = 0.7 * thread.burn_estimate + 0.3 * drop
        else:
            yield from self._compact(thread, now)

    def _compact(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        """Package ready, compaction started and completed, package consumed; the budget recovers to 70-95."""
        started, completed = self._before(thread, now, 0.3), self._before(thread, now, 0.1)
        if self.config.self_handoff:
            yield from self._package_to(thread, PackageStatus.READY, started)
        trigger = self.rng.choice((TriggerMode.MID_LOOP, TriggerMode.REQUEST_START))
        before = _tokens_used(thread.pct)
        thread.pct = self.rng.uniform(70, 95)
        thread.compaction_floor = self.rng.uniform(2, 10)
        base = self._event_fields(thread, started)
        yield _event_record(CompactionStarted(**base, trigger_mode=trigger, tokens_before=before))
        after = _tokens_used(thread.pct)
        base = self._event_fields(thread, completed)
        yield _event_record(CompactionCompleted(**base, trigger_mode=trigger, tokens_before=before, tokens_after=after))
        thread.compaction_count += 1
        thread.last_compaction_at = completed
        if self.config.self_handoff:
            yield from self._package_to(thread, PackageStatus.CONSUMED, completed)
        thread.package = None

    def _facts(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        for fact in list(thread.facts):
            if self.rng.random() < _FACT_RESOLVE_RATE:
                files = thread.facts.pop(fact)
                base = self._event_fields(thread, now)
                yield _event_record(WorkFactChanged(**base, fact=fact, active=False, files=files))
        if len(thread.facts) < _MAX_ACTIVE_FACTS and self.rng.random() < _FACT_START_RATE:
            fact = self.rng.choice([candidate for candidate in WorkFact if candidate not in thread.facts])
            files = self.rng.sample(thread.files, 1) if fact in _FILE_FACTS else []
            thread.facts[fact] = files
            detail = f"{fact.value.replace('_', ' ')} in {thread.task_id}"
            base = self._event_fields(thread, now)
            yield _event_record(WorkFactChanged(**base, fact=fact, active=True, detail=detail, files=files))

    @staticmethod
    def _event_fields(thread: _Thread, at: datetime) -> dict[str, Any]:
        """The common fields of the thread's next session event (which takes the next event id)."""
        thread.events += 1
        return {
            "thread_id": thread.thread_id,
            "event_id": f"{thread.thread_id}-e{thread.events}",
            "occurred_at": at,
            "project_id": thread.project_id,
        }

    def _package_to(self, thread: _Thread, status: PackageStatus, at: datetime) -> Iterator[SimRecord]:
        """Move the thread's handoff package forward to `status`, emitting every stage it passes through."""
        current = thread.package.package_status if thread.package else None
        first = _PACKAGE_STAGES.index(current) + 1 if current else 0
        for stage in _PACKAGE_STAGES[first : _PACKAGE_STAGES.index(status) + 1]:
            thread.package = self._package(thread, stage, at)
            yield SimRecord(HANDOFF_PACKAGES, thread.key, _PACKAGE_CODEC.encode(thread.package), "valid")

    @staticmethod
    def _package(thread: _Thread, stage: PackageStatus, at: datetime) -> HandoffPackage:
        if thread.package is None:
            return HandoffPackage(
                handoff_package_id=f"hp-{thread.thread_id}-{thread.compaction_count + 1}",
                project_id=thread.project_id,
                task_id=thread.task_id,
                from_thread_id=thread.thread_id,
                package_status=stage,
                critical_files=thread.files[:1],
                created_at=at,
            )
        if stage is PackageStatus.READY:
            fact_files = [name for files in thread.facts.values() for name in files]
            return _revise(
                thread.package,
                package_status=stage,
                summary_text=f"{thread.task_id}: budget at {thread.pct:.0f}%, {len(thread.facts)} open work facts; "
                f"continue from {thread.files[0]}.",
                open_questions=[f"Is the {thread.modules[0]} change ready to merge?"],
                critical_files=list(dict.fromkeys(thread.files + fact_files)),
                critical_commands=[f"pytest tests/test_{module}.py -q" for module in thread.modules],
                critical_tests=[f"tests/test_{thread.modules[0]}.py::test_{thread.modules[0]}_regression"],
                ready_at=at,
            )
        return _revise(thread.package, package_status=stage, consumed_at=at)

    def _snapshots(self, thread: _Thread, now: datetime) -> Iterator[SimRecord]:
        snapshot = self._snapshot(thread, thread.source, thread.pct, now)
        value = _SNAPSHOT_CODEC.encode(snapshot)
        thread.sent.append(value)
        yield SimRecord(SNAPSHOTS, thread.key, value, "valid")
        if self.rng.random() < self.config.duplicate_rate:
            yield SimRecord(SNAPSHOTS, thread.key, value, "duplicate")
        if len(thread.sent) > 1 and self.rng.random() < self.config.late_rate:
            yield SimRecord(SNAPSHOTS, thread.key, self.rng.choice(list(thread.sent)[:-1]), "late")
        if thread.source is not SourceKind.WORKER_ESTIMATOR and self.rng.random() < self.config.estimator_rate:
            noisy = min(100.0, max(0.0, thread.pct + self.rng.uniform(-_ESTIMATOR_NOISE_PCT, _ESTIMATOR_NOISE_PCT)))
            estimate = self._snapshot(thread, SourceKind.WORKER_ESTIMATOR, noisy, now)
            yield SimRecord(SNAPSHOTS, thread.key, _SNAPSHOT_CODEC.encode(estimate), "valid")
        if self.rng.random() < self.config.invalid_rate:
            corrupt = self.rng.choice(_CORRUPTIONS)
            yield SimRecord(SNAPSHOTS, thread.key, corrupt(snapshot.model_dump(mode="json")), "invalid")

    def _snapshot(self, thread: _Thread, source: SourceKind, pct: float, now: datetime) -> ThreadContextSnapshot:
        version = thread.versions.get(source, 0) + 1
        thread.versions[source] = version
        pct = round(pct, 1)
        level = classify_level(pct)
        reported = level
        if self.rng.random() < self.config.mismatch_rate:
            reported = self.rng.choice([other for other in ContextBudgetLevel if other is not level])
        turns_left = pct / thread.burn_estimate
        return ThreadContextSnapshot(
            node_id=thread.node_id,
            worker_id=thread.worker_id,
            thread_id=thread.thread_id,
            project_id=thread.project_id,
            task_id=thread.task_id,
            source_kind=source,
            context_budget_remaining_pct=pct,
            context_budget_level=reported,
            compaction_expected_at=now + timedelta(seconds=turns_left * self.config.turn_seconds),
            must_finish_before_compaction=bool(thread.facts)
            and level in (ContextBudgetLevel.URGENT, ContextBudgetLevel.CRITICAL),
            estimated_remaining_turns=int(turns_left),
            estimated_remaining_large_messages=int(turns_left / 3),
            last_compaction_at=thread.last_compaction_at,
            compaction_count=thread.compaction_count,
            captured_at=now,
            snapshot_id=f"snap-{thread.thread_id}-{source.value}-{version}",
            snapshot_version=version,
        )


def generate(config: SimulationConfig) -> Iterator[SimRecord]:
    """The fleet's records in send order: threads interleaved turn by turn, each thread's records in its own order."""
    return _Fleet(config).run()


MASTER_THREAD = _thread_id(0)
"""The fleet's master agent runs on its first thread."""


def registry(config: SimulationConfig) -> list[SimRecord]:
    """The conversations a deployment registers for the fleet (spec 6.1, 7.1-7.3): a single_device one per thread, a
    group one per project showing every thread of it, and one master_agent whose main thread is `MASTER_THREAD`."""
    threads = [_thread_id(index) for index in range(config.threads)]
    project_of = {thread: _project_id(index, config.projects) for index, thread in enumerate(threads)}
    projects = list(dict.fromkeys(project_of.values()))
    at = config.start.astimezone(UTC)

    def conversation(kind: ConversationType, cid: str, project: str, title: str, shown: list[str]) -> Conversation:
        return Conversation(
            conversation_id=cid,
            conversation_type=kind,
            project_id=project,
            project_title=title,
            thread_ids=shown,
            updated_at=at,
        )

    conversations = chain(
        [
            conversation(
                ConversationType.MASTER_AGENT, "master", project_of[MASTER_THREAD], "master agent", [MASTER_THREAD]
            )
        ],
        (conversation(ConversationType.SINGLE_DEVICE, f"conv-{t}", project_of[t], f"device {t}", [t]) for t in threads),
        (
            conversation(
                ConversationType.GROUP, f"group-{p}", p, f"project {p}", [t for t in threads if project_of[t] == p]
            )
            for p in projects
        ),
    )
    return [
        SimRecord(CONVERSATIONS, item.conversation_id.encode(), _CONVERSATION_CODEC.encode(item), "valid")
        for item in conversations
    ]


def live_traffic(config: SimulationConfig) -> Iterator[SimRecord]:
    """What a live fleet sends: its conversations first, then its records stamped with the wall clock."""
    live = replace(config, clock=config.clock or (lambda: datetime.now(UTC)))
    return chain(registry(live), generate(live))


async def produce(records: Iterable[SimRecord], bootstrap: str, topic_prefix: str, rate: float | None = None) -> int:
    """Send records to `{topic_prefix}{topic}` with their keys, at most `rate` per second (None: as fast as possible).

    Idempotent with acks from all replicas; returns the number sent once every one is acknowledged.
    """
    if rate is not None and rate <= 0:
        raise ValueError("rate must be positive")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent = 0
    pending: list[asyncio.Future[Any]] = []
    try:
        for record in records:
            if rate is not None:
                await asyncio.sleep(max(0.0, started + sent / rate - loop.time()))
            pending.append(await producer.send(f"{topic_prefix}{record.topic}", record.value, key=record.key))
            sent += 1
            if len(pending) >= _MAX_PENDING_SENDS:
                await asyncio.gather(*pending)
                pending.clear()
        await producer.flush()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent
