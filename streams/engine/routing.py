"""The engine's fold [thread_id], the chain `core.folds.ENGINE_FOLD` declares: the `ENGINE` processor, then
`ROUTING`, in one agent with one table, each record decoded once.

The engine's batch (`process_batch`) or timer (`tick_all`) runs first; the thread states it publishes (the topics the
chain hands the routing, `ENGINE_FOLD.handed(ROUTING)`) are then routed in process (`streams.aggregates.routes`), with
no encode or decode between the two, after the batch's records of the routing's own inputs and the handoff packages
both read, in batch order. Each thread's routes live in its slot (`ThreadSlot.routes`), so a thread keeps one state,
written once per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from core.engine_config import EngineConfig
from core.fleet_points import PointLookup, no_points
from core.folds import ENGINE_FOLD, ROUTING
from core.topics import CONVERSATION_LINKS, TASK_IMPORTANCE
from schemas import Codec, DecodeError, HandoffPackage, ThreadState, ThresholdPolicy
from schemas.copies import replaced
from schemas.projects import ConversationLink, TaskImportance, ThreadRoutes
from streams.aggregates import routes
from streams.aggregates.config import ProjectsConfig
from streams.batching import BatchResult, Emit, InputMessage, dead_letter, decode_keyed
from streams.engine.batch import process_batch, tick_all
from streams.engine.fold import ThreadSlot

ROUTING_DECODERS: dict[str, Codec] = {
    CONVERSATION_LINKS: Codec(ConversationLink),
    TASK_IMPORTANCE: Codec(TaskImportance),
}
"""The inputs only the routing reads, `ENGINE_FOLD.own(ROUTING)` (the engine decodes the handoff packages for both)."""
HANDED = ENGINE_FOLD.handed(ROUTING)
"""What the engine emits that the routing reads: its thread states."""


def fused_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], ThreadSlot | None],
    lookup_policy: Callable[[str], ThresholdPolicy | None],
    now: datetime,
    engine: EngineConfig,
    projects: ProjectsConfig,
    prefix: str,
    points: PointLookup = no_points,
) -> BatchResult[ThreadSlot]:
    inputs: list[tuple[str, routes.RoutingInput]] = []
    dead: list[Emit] = []

    def engine_messages() -> Iterator[InputMessage]:
        # Consumed as the engine walks the batch, so the packages it hands back land among the links in batch order.
        for message in messages:
            decoder = ROUTING_DECODERS.get(message.topic)
            if decoder is None:
                yield message
                continue
            try:
                inputs.append(decode_keyed(message, decoder.decode, lambda record: record.thread_id))
            except DecodeError as error:
                dead.append(dead_letter(message, error.reason, error.detail, now, prefix))

    def on_record(thread_id: str, record: object) -> None:
        if isinstance(record, HandoffPackage):
            inputs.append((thread_id, record))

    result = process_batch(engine_messages(), load, lookup_policy, now, engine, prefix, on_record, points)
    result.emits += dead
    return _routed(result, inputs, load, projects)


def fused_tick(
    slots: Iterable[tuple[str, ThreadSlot]], now: datetime, engine: EngineConfig, projects: ProjectsConfig
) -> BatchResult[ThreadSlot]:
    """The engine's timer pass; the thread states it publishes (a thread gone stale, ...) are routed too."""
    held: dict[str, ThreadSlot] = {}

    def remembered() -> Iterator[tuple[str, ThreadSlot]]:
        for thread_id, slot in slots:
            held[thread_id] = slot
            yield thread_id, slot

    return _routed(tick_all(remembered(), now, engine), [], held.get, projects)


def route_all(
    inputs: Iterable[tuple[str, routes.RoutingInput]],
    load: Callable[[str], ThreadRoutes | None],
    config: ProjectsConfig,
) -> BatchResult[ThreadRoutes]:
    """Each (thread id, record) into that thread's routes, in order."""
    result = BatchResult[ThreadRoutes]()
    held: dict[str, ThreadRoutes | None] = {}
    for thread_id, record in inputs:
        if thread_id not in held:
            held[thread_id] = load(thread_id)
        change = routes.route(held[thread_id], record, config)
        if change.state is not None:
            held[thread_id] = result.states[thread_id] = change.state
        result.emits.extend(change.emits)
    return result


def _routed(
    result: BatchResult[ThreadSlot],
    inputs: list[tuple[str, routes.RoutingInput]],
    prior: Callable[[str], ThreadSlot | None],
    config: ProjectsConfig,
) -> BatchResult[ThreadSlot]:
    """The engine's `result` with the routing's records added and each thread's routes in its slot. `prior` gives a
    thread's slot as it was before: the engine builds new slots without routes."""

    def routes_before(thread_id: str) -> ThreadRoutes | None:
        slot = prior(thread_id)
        return slot.routes if slot is not None else None

    states = [(e.key, e.record) for e in result.emits if e.topic in HANDED and isinstance(e.record, ThreadState)]
    routed = route_all([*inputs, *states], routes_before, config)
    result.emits += routed.emits
    for thread_id, slot in list(result.states.items()):
        kept = routed.states[thread_id] if thread_id in routed.states else routes_before(thread_id)
        if slot.routes is not kept:
            result.states[thread_id] = replaced(slot, {"routes": kept})
    for thread_id, kept in routed.states.items():
        if thread_id not in result.states:
            result.states[thread_id] = replaced(prior(thread_id) or ThreadSlot(), {"routes": kept})
    return result
