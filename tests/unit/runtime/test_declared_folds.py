"""The declared topology (core/folds.py) is what the worker wires, and the runtime holds every fold to its outputs."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core.folds import FOLDS, SINKS_FOLD, Fold
from core.settings import ROLES, Settings
from core.topics import (
    ALERT_COMMANDS_BY_THREAD,
    ALERTS,
    DEADLETTER,
    THREAD_STATE,
)
from schemas.codec import Codec
from schemas.projects import ThreadRoutes
from sinks.tables import ROUTES
from streams.batching import BatchResult, Emit, Encoded
from streams.runtime.agents import Runtime
from streams.runtime.app import create_app
from streams.runtime.memory import MemoryRuntime
from streams.runtime.protocol import UndeclaredOutput
from streams.topology import declared, wire
from streams.worker import build
from tests.unit.engine.builders import T0, ack

ROUTER = Fold("router", frozenset({"aggregates"}), (THREAD_STATE,), (ALERT_COMMANDS_BY_THREAD, DEADLETTER))


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path)
    return Runtime(create_app(settings), settings)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Emit]:
    captured: list[Emit] = []

    async def send(self: Runtime, emits: list[Emit], encoded: object = None) -> None:
        captured.extend(emits)

    monkeypatch.setattr(Runtime, "send", send)
    return captured


def command_emit(topic: str) -> Emit:
    command = ack("thread-a:context_watch:1", thread="thread-a")
    return Emit(topic, command.thread_id, command)


async def test_an_emit_to_an_undeclared_topic_is_refused_and_nothing_of_the_batch_is_sent(
    runtime: Runtime, sent: list[Emit]
) -> None:
    with pytest.raises(UndeclaredOutput, match=r"fold 'router' emitted to alerts, which it does not declare"):
        await runtime.emit(ROUTER, [command_emit(ALERT_COMMANDS_BY_THREAD), command_emit(ALERTS)])
    assert sent == []
    declared = [command_emit(ALERT_COMMANDS_BY_THREAD), command_emit(DEADLETTER)]
    await runtime.emit(ROUTER, declared)
    assert sent == declared


async def test_a_keyed_fold_publishes_only_to_its_declared_outputs(runtime: Runtime, sent: list[Emit]) -> None:
    fold = runtime.keyed_fold(ROUTER, Codec(ThreadRoutes).decode, batch=lambda messages, load, now: BatchResult())
    result = BatchResult(emits=[command_emit(ALERTS)])
    with pytest.raises(UndeclaredOutput, match="router"):
        await fold._publish(result, Encoded.of(result))
    assert sent == []
    assert fold.table.data == {}


def test_a_timer_must_be_declared(runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="router"):
        runtime.keyed_fold(ROUTER, Codec(ThreadRoutes).decode, batch=lambda m, load, now: BatchResult(), tick=print)


@pytest.mark.parametrize("role", ROLES)
def test_each_role_wires_exactly_its_declared_folds_over_their_declared_inputs(role: str, tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles=role)
    app = build(settings, clickhouse=object())  # type: ignore[arg-type]  # the sink only stores the client here
    declared = {fold.name: fold for fold in FOLDS if role in fold.roles}
    assert set(app.agents) == set(declared)
    for name, agent in app.agents.items():
        wired = set(agent.channel.topics)  # type: ignore[attr-defined]
        assert wired == {settings.topic(topic) for topic in declared[name].inputs}, name


def test_the_sinks_read_exactly_the_routed_topics() -> None:
    assert set(SINKS_FOLD.inputs) == set(ROUTES)
    assert len(SINKS_FOLD.inputs) == len(set(SINKS_FOLD.inputs))


@pytest.mark.parametrize("role", ROLES)
def test_the_in_memory_runtime_runs_the_same_declaration(role: str, tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles=role)
    memory = MemoryRuntime(settings, T0)
    wire(memory, settings)
    declared = {fold.name for fold in FOLDS if role in fold.roles}
    assert {fold.name for fold in memory.folds} == declared


def test_the_in_memory_runtime_refuses_an_undeclared_emit_and_reads_the_batch_again(tmp_path: Path) -> None:
    memory = MemoryRuntime(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path), T0)
    emits = [command_emit(ALERT_COMMANDS_BY_THREAD), command_emit(ALERTS)]
    memory.stateless_fold(ROUTER, batch=lambda messages, now: emits[: len(messages) + 1])
    memory.produce(THREAD_STATE, "thread-a", b"{}")
    with pytest.raises(UndeclaredOutput, match="router"):
        memory.step("router", 10)
    assert (memory.published, memory.topics[ALERT_COMMANDS_BY_THREAD]) == ([], [])
    assert memory.pending() == ["router"]
    emits.pop()
    memory.drain()
    assert memory.published == emits
    assert [m.key for m in memory.topics[ALERT_COMMANDS_BY_THREAD]] == [b"thread-a"]


def test_the_in_memory_timer_wakes_only_the_states_whose_deadline_passed(tmp_path: Path) -> None:
    """As the Faust runtime's deadline index: a state is ticked once its `wake` instant has come, and an unchanged one
    again only at its next instant."""
    memory = MemoryRuntime(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path), T0)
    ticked: list[list[str]] = []
    timed = Fold("timed", frozenset({"aggregates"}), (THREAD_STATE,), (DEADLETTER,), table="routes", timer=True)
    deadline = {"thread-a": T0 + timedelta(seconds=5), "thread-b": T0 + timedelta(seconds=50)}

    def batch(messages: list, load: object, now: datetime) -> BatchResult[ThreadRoutes]:
        return BatchResult(states={m.key.decode(): ThreadRoutes(thread_id=m.key.decode()) for m in messages})

    def tick(states: Iterable[tuple[str, ThreadRoutes]], now: datetime) -> BatchResult[ThreadRoutes]:
        ticked.append([key for key, _ in states])
        return BatchResult()

    def wake(state: ThreadRoutes, after: datetime | None) -> datetime | None:
        at = deadline[state.thread_id]
        return at if after is None or at > after else at + timedelta(seconds=100)

    memory.keyed_fold(timed, Codec(ThreadRoutes).decode, batch, tick=tick, wake=wake)
    for thread in deadline:
        memory.produce(THREAD_STATE, thread, b"{}")
    memory.drain()
    for seconds in (1, 6, 7, 60):
        memory.tick(T0 + timedelta(seconds=seconds))
    assert ticked == [[], ["thread-a"], [], ["thread-b"]]


@pytest.mark.parametrize("role", ROLES)
def test_the_declaration_names_the_tables_and_inputs_the_worker_registers(role: str, tmp_path: Path) -> None:
    """`ctxbudget topics` and `status` read them from the declaration, without building the Faust app."""
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles=role)
    app = build(settings, clickhouse=object())  # type: ignore[arg-type]  # the sink only stores the client here
    assert set(declared(settings).tables) == set(app.tables)
    assert {topic for fold in declared(settings).folds for topic in fold.inputs} == {
        topic.removeprefix(settings.topic_prefix) for agent in app.agents.values() for topic in agent.channel.topics
    }
