"""Inputs at the contract's limits (every id 128 characters, work facts of 1,000 files each) go through every fold of
the declared topology: nothing the pipeline derives from them passes a limit, so none is refused or dead-lettered
and no batch fails, which would hold its partition."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.ids import derived_id
from core.levels import classify_level
from core.settings import Settings
from core.topics import (
    CONVERSATIONS,
    DEADLETTER,
    HANDOFF_PACKAGES,
    MASTER_ACTION_COMMANDS,
    SESSION_EVENTS,
    SNAPSHOTS,
    TASK_IMPORTANCE,
)
from schemas import (
    ConversationType,
    HandoffPackage,
    MasterAction,
    MasterActionCommand,
    SourceKind,
    ThreadContextSnapshot,
    WorkFact,
    WorkFactChanged,
)
from schemas.base import MAX_ID_LENGTH, MAX_LIST_ITEMS
from schemas.codec import encode_record
from schemas.projects import TaskImportance
from schemas.session_events import CompactionCompleted, CompactionStarted, MessageAdded, UsageSample
from streams.runtime.memory import MemoryRuntime
from streams.topology import wire
from tests.unit.aggregates.builders import conversation
from tests.unit.engine.builders import T0, at


def longest(prefix: str) -> str:
    return prefix + "x" * (MAX_ID_LENGTH - len(prefix))


THREAD, PROJECT, NODE = longest("thread-"), longest("project-"), longest("node-")


def test_derived_ids_stay_within_the_limit_and_apart() -> None:
    assert derived_id("thread-a", "snap-1", "updated") == "thread-a:snap-1:updated"
    a, b = derived_id(THREAD, longest("snap-a"), "updated"), derived_id(THREAD, longest("snap-b"), "updated")
    assert len(a) == len(b) == MAX_ID_LENGTH
    assert a != b
    assert a == derived_id(THREAD, longest("snap-a"), "updated")


def _snapshot(pct: float, version: int, seconds: float, compactions: int = 0) -> ThreadContextSnapshot:
    return ThreadContextSnapshot(
        snapshot_id=longest(f"snap-{version}-"),
        snapshot_version=version,
        thread_id=THREAD,
        project_id=PROJECT,
        node_id=NODE,
        worker_id=longest("worker-"),
        source_kind=SourceKind.CODEX_APP_SERVER,
        context_budget_remaining_pct=pct,
        context_budget_level=classify_level(pct),
        must_finish_before_compaction=True,
        compaction_expected_at=at(seconds + 60),
        compaction_count=compactions,
        last_compaction_at=at(seconds) if compactions else None,
        captured_at=at(seconds),
    )


def _fact(fact: WorkFact, seconds: float) -> WorkFactChanged:
    return WorkFactChanged(
        thread_id=THREAD,
        event_id=longest(f"wf-{fact.value}-"),
        occurred_at=at(seconds),
        fact=fact,
        active=True,
        files=[f"src/{fact.value}/{i:04d}.py" for i in range(MAX_LIST_ITEMS)],
    )


def _package(seconds: float) -> HandoffPackage:
    return HandoffPackage(
        handoff_package_id=longest("hp-"),
        project_id=PROJECT,
        from_thread_id=THREAD,
        package_status="ready",
        created_at=at(seconds),
        ready_at=at(seconds),
        summary_text="state of work",
        critical_files=[f"pkg/{i:04d}.py" for i in range(MAX_LIST_ITEMS)],
        critical_commands=["make"],
        critical_tests=["t::x"],
        critical_artifacts=[f"https://ci/{i}" for i in range(MAX_LIST_ITEMS)],
        decision_links=[f"https://adr/{i}" for i in range(MAX_LIST_ITEMS)],
    )


@pytest.fixture
def runtime() -> MemoryRuntime:
    settings = Settings(roles="engine,projection,aggregates", kafka_bootstrap_servers="127.0.0.1:9")
    runtime = MemoryRuntime(settings, T0)
    wire(runtime, settings)
    yield runtime
    runtime.close()


def test_inputs_at_their_limits_pass_every_fold(runtime: MemoryRuntime) -> None:
    def feed(topic: str, key: str, record, seconds: float) -> None:
        runtime.now = at(seconds)
        runtime.produce(topic, key, record)
        runtime.drain()

    feed(CONVERSATIONS, longest("conv-"), conversation(longest("conv-"), ConversationType.GROUP, [THREAD],
                                                        project=PROJECT), 0)  # fmt: skip
    feed(TASK_IMPORTANCE, THREAD, TaskImportance(thread_id=THREAD, project_id=PROJECT, task_importance=900,
                                                 set_by=longest("master-"), set_at=at(0)), 0)  # fmt: skip
    for version, (pct, seconds) in enumerate([(80, 1), (30, 20), (15, 40), (8, 60)], start=1):
        feed(SNAPSHOTS, THREAD, _snapshot(pct, version, seconds), seconds)
    for seconds, fact in enumerate(WorkFact, start=61):
        feed(SESSION_EVENTS, THREAD, _fact(fact, seconds), seconds)
    events = [
        UsageSample(thread_id=THREAD, event_id=longest("usage-"), occurred_at=at(70), input_tokens=190_000,
                    model=longest("model-"), context_window_tokens=200_000),
        MessageAdded(thread_id=THREAD, event_id=longest("msg-"), occurred_at=at(71), role="user", token_count=5_000),
        CompactionStarted(thread_id=THREAD, event_id=longest("cs-"), occurred_at=at(72), trigger_mode="mid_loop"),
    ]  # fmt: skip
    for event in events:
        feed(SESSION_EVENTS, THREAD, event, 70)
    request = MasterActionCommand(action_id=longest("req-"), thread_id=THREAD, command="request", issued_at=at(73),
                                  action=MasterAction.PREPARE_HANDOFF, issued_by=longest("master-"))  # fmt: skip
    feed(MASTER_ACTION_COMMANDS, THREAD, request, 73)
    feed(HANDOFF_PACKAGES, THREAD, _package(74), 74)
    done = CompactionCompleted(thread_id=THREAD, event_id=longest("cc-"), occurred_at=at(80), trigger_mode="mid_loop",
                               tokens_before=190_000, tokens_after=20_000)  # fmt: skip
    feed(SESSION_EVENTS, THREAD, done, 80)
    feed(SNAPSHOTS, THREAD, _snapshot(85, 5, 81, compactions=1), 81)
    for minutes in (5, 30, 24 * 60):
        runtime.tick(at(81) + timedelta(minutes=minutes))
        runtime.drain()

    assert [e.record for e in runtime.published if e.topic == DEADLETTER] == []
    topics = {e.topic for e in runtime.published}
    derived = {"alerts", "master-actions", "client-events", "context-events", "snapshots", "compactions"}
    assert derived | {"project-risk", "conversation-indicators"} <= topics
    for emit in runtime.published:  # each record as its consumers validate it
        assert type(emit.record).model_validate_json(encode_record(emit.record)) == emit.record
