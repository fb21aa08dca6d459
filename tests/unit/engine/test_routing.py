"""The engine's fold, a chain of the engine and the routing (`core.folds.ENGINE_FOLD`), publishes what its two steps
publish as folds of their own, hop through `thread-state` included: the engine's batch and timer over its inputs,
then the routing batch over its inputs and the engine's thread states as bytes, each with its table stored as bytes.
Same inputs, any batching, timer passes between batches."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from core.engine_config import EngineConfig
from core.folds import ENGINE as ENGINE_STEP
from core.folds import ENGINE_FOLD
from core.folds import ROUTING as ROUTING_STEP
from core.topics import (
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    HANDOFF_PACKAGES,
    SNAPSHOTS,
    TASK_IMPORTANCE,
    THREAD_STATE,
    THREAD_STATE_BY_PROJECT,
)
from schemas import Record
from schemas.codec import encode_record
from schemas.projects import ConversationLink, TaskImportance, ThreadRoutes
from streams.aggregates.config import ProjectsConfig
from streams.batching import BatchResult, Emit, InputMessage
from streams.engine.batch import SLOT_CODEC, process_batch, tick_all
from streams.engine.fold import ThreadSlot
from streams.engine.routing import HANDED, ROUTING_DECODERS, fused_batch, fused_tick
from tests.unit.aggregates.builders import PREFIX, ROUTES_CODEC, routing_batch
from tests.unit.engine.builders import at, package, snapshot

ENGINE = EngineConfig()
PROJECTS = ProjectsConfig(retire_after=timedelta(seconds=120))
"""Short, so that some forwards are refreshes (every 20 s)."""
THREADS = ("a", "b", "c")
ROUTED = (THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS)
SECONDS = 3.0
"""Between two inputs: some reports pass a deadline, so timer passes turn threads stale."""


@st.composite
def inputs(draw: st.DrawFn) -> list[tuple[str, str, Record | bytes]]:
    out: list[tuple[str, str, Record | bytes]] = []
    for i in range(draw(st.integers(1, 30))):
        thread = draw(st.sampled_from(THREADS))
        seconds = i * SECONDS
        kind = draw(st.sampled_from(["snapshot", "snapshot", "snapshot", "link", "importance", "package", "bad"]))
        if kind == "snapshot":
            pct = draw(st.floats(5, 100, allow_nan=False))
            out.append((SNAPSHOTS, thread, snapshot(pct, thread=thread, seconds=seconds, expected_in=600)))
        elif kind == "link":
            conversation = draw(st.sampled_from(["c-1", "c-2", "c-3", "c-4"]))
            link = ConversationLink(conversation_id=conversation, thread_id=thread, linked=draw(st.booleans()))
            out.append((CONVERSATION_LINKS, thread, link))
        elif kind == "importance":
            value = draw(st.integers(0, 9))
            out.append((TASK_IMPORTANCE, thread, TaskImportance(
                thread_id=thread, project_id="proj-1", task_importance=value, set_by="master", set_at=at(seconds)
            )))  # fmt: skip
        elif kind == "package":
            status = draw(st.sampled_from(["ready", "consumed"]))
            consumed = package(status, thread=thread, package_id=f"hp-{thread}-{i}", seconds=seconds)
            out.append((HANDOFF_PACKAGES, thread, consumed.model_copy(update={"to_thread_id": "relay"})))
        else:
            out.append((draw(st.sampled_from([CONVERSATION_LINKS, TASK_IMPORTANCE])), thread, b"{}"))
    return out


class TwoFolds:
    """The engine and the routing as folds of their own, `thread-state` between them as bytes."""

    def __init__(self) -> None:
        self.slots: dict[str, bytes] = {}
        self.routes: dict[str, bytes] = {}
        self.published: list[Emit] = []

    def batch(self, messages: list[InputMessage], now_seconds: float) -> None:
        now = at(now_seconds)
        engine = [m for m in messages if m.topic in ENGINE_STEP.inputs]
        routing = [m for m in messages if m.topic in ROUTING_STEP.inputs]
        result = process_batch(engine, self._slot, {}.get, now, ENGINE, PREFIX)
        self._engine(result, routing, now_seconds)

    def tick(self, now_seconds: float) -> None:
        slots = [(key, SLOT_CODEC.decode(raw)) for key, raw in sorted(self.slots.items())]  # alike in both
        self._engine(tick_all(slots, at(now_seconds), ENGINE), [], now_seconds)

    def _engine(self, result: BatchResult, routing: list[InputMessage], now_seconds: float) -> None:
        self.slots.update({key: SLOT_CODEC.encode(slot) for key, slot in result.states.items()})
        states = [e for e in result.emits if e.topic == THREAD_STATE]
        hop = [InputMessage(THREAD_STATE, 0, 0, e.key.encode(), encode_record(e.record)) for e in states]
        routed = routing_batch([*routing, *hop], self._routes, at(now_seconds), PROJECTS)
        self.routes.update({key: ROUTES_CODEC.encode(routes) for key, routes in routed.states.items()})
        # the routing fold dead-lettered only its own inputs: the engine reads the packages and dead-letters them
        own = [e for e in routed.emits if e.topic != "deadletter" or not e.record.source_topic.endswith("packages")]
        self.published += result.emits + own

    def _slot(self, key: str) -> ThreadSlot | None:
        raw = self.slots.get(key)
        return SLOT_CODEC.decode(raw) if raw is not None else None

    def _routes(self, key: str) -> ThreadRoutes | None:
        raw = self.routes.get(key)
        return ROUTES_CODEC.decode(raw) if raw is not None else None


class Fused:
    def __init__(self) -> None:
        self.slots: dict[str, bytes] = {}
        self.published: list[Emit] = []

    def batch(self, messages: list[InputMessage], now_seconds: float) -> None:
        load = lambda key: SLOT_CODEC.decode(self.slots[key]) if key in self.slots else None  # noqa: E731
        self._keep(fused_batch(messages, load, {}.get, at(now_seconds), ENGINE, PROJECTS, PREFIX))

    def tick(self, now_seconds: float) -> None:
        slots = [(key, SLOT_CODEC.decode(raw)) for key, raw in sorted(self.slots.items())]  # alike in both
        self._keep(fused_tick(slots, at(now_seconds), ENGINE, PROJECTS))

    def _keep(self, result: BatchResult) -> None:
        self.slots.update({key: SLOT_CODEC.encode(slot) for key, slot in result.states.items()})
        self.published += result.emits


def by_key(emits: list[Emit]) -> dict[tuple[str, str], list[bytes]]:
    """What each key of each topic receives, in order: the order Kafka keeps (a partition's)."""
    out: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for emit in emits:
        out[emit.topic, emit.key].append(encode_record(emit.record))
    return dict(out)


@settings(max_examples=100, deadline=None)
@given(inputs(), st.data())
def test_the_chain_publishes_what_the_engine_and_routing_publish_as_folds_of_their_own(
    records: list[tuple[str, str, Record | bytes]], data: st.DataObject
) -> None:
    messages = [
        InputMessage(topic, 0, i, key.encode(), value if isinstance(value, bytes) else encode_record(value),
                     timestamp=at(i * SECONDS + 1))
        for i, (topic, key, value) in enumerate(records)
    ]  # fmt: skip
    old, fused = TwoFolds(), Fused()
    start = 0
    while start < len(messages):
        end = start + data.draw(st.integers(1, 6))
        now = min(end, len(messages)) * SECONDS
        for fold in (old, fused):
            fold.batch(messages[start:end], now)
        if data.draw(st.booleans()):
            later = now + data.draw(st.sampled_from([1.0, 20.0, 400.0]))
            for fold in (old, fused):
                fold.tick(later)
        start = end
    assert by_key(fused.published) == by_key(old.published)
    assert {key: _without_routes(raw) for key, raw in fused.slots.items() if _without_routes(raw)} == {
        key: _without_routes(raw) for key, raw in old.slots.items()
    }
    routes = {key: SLOT_CODEC.decode(raw).routes for key, raw in fused.slots.items()}
    assert {key: r for key, r in routes.items() if r is not None} == {
        key: ROUTES_CODEC.decode(raw) for key, raw in old.routes.items()
    }


def test_a_link_before_the_threads_first_state_is_kept_and_the_state_then_reaches_the_conversation() -> None:
    link = ConversationLink(conversation_id="c-1", thread_id="a", linked=True)
    fused = Fused()
    fused.batch([InputMessage(CONVERSATION_LINKS, 0, 0, b"a", encode_record(link), timestamp=at(0))], 1)
    assert fused.published == []
    assert SLOT_CODEC.decode(fused.slots["a"]).state is None
    state = snapshot(70, thread="a", seconds=1)
    fused.batch([InputMessage(SNAPSHOTS, 0, 0, b"a", encode_record(state), timestamp=at(2))], 2)
    [shown] = [e.record for e in fused.published if e.topic == CONVERSATION_THREADS]
    assert (shown.conversation_id, shown.shown.context_budget_remaining_pct) == ("c-1", 70)


def _without_routes(raw: bytes) -> Record | None:
    """The slot as the engine alone keeps it (None: only routes, which the engine alone never stored)."""
    slot = SLOT_CODEC.decode(raw).model_copy(update={"routes": None})
    return None if slot == ThreadSlot() else slot


def test_the_engines_fold_is_the_declared_chain_of_the_engine_and_the_routing() -> None:
    """What `streams.engine.routing` runs: the routing decodes its own inputs and takes the engine's thread states."""
    assert ENGINE_FOLD.chain == (ENGINE_STEP, ROUTING_STEP)
    assert set(ROUTING_DECODERS) == set(ENGINE_FOLD.own(ROUTING_STEP))
    assert HANDED == ENGINE_FOLD.handed(ROUTING_STEP) == (THREAD_STATE,)
