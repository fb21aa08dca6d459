"""The whole stream topology at a glance: topic -> agent -> table -> topic.

    alert-commands [alert_id]  -> route_alert_commands -> alert-commands-by-thread [thread_id]
    policies [project_id]      -> load_policies        -> policies (global table)
    snapshots [thread_id]          \\
    session-events [thread_id]      > thread_engine  -> thread-slots (table, changelog)
    handoff-packages [thread_id]   |                 -> thread-state, context-events, alerts, master-actions,
    alert-commands-by-thread      /                     client-events, deadletter
    timer (tick_seconds)           -> tick_threads   -> same outputs (stale threads, expiries, grace periods)

All four engine inputs are keyed by thread id and have the same partition count, so one agent sees every record of
a thread, in order, and is the only writer of its slot. The domain logic lives in `streams.engine` (pure); the agents
here only move bytes between topics, tables and those functions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import faust
from aiokafka.partitioner import murmur2

from schemas import DEFAULT_POLICY, Codec, DecodeError, ThresholdPolicy
from schemas.alert import AlertCommand
from schemas.codec import encode_record
from schemas.policy import DEFAULT_POLICY_PROJECT_ID
from streams.app import create_app
from streams.engine.batch import (
    ALERT_COMMANDS_BY_THREAD,
    SLOT_CODEC,
    BatchResult,
    InputMessage,
    dead_letter,
    process_batch,
    tick_all,
)
from streams.engine.config import EngineConfig
from streams.engine.fold import ThreadSlot
from streams.settings import Settings

log = logging.getLogger(__name__)

ENGINE_INPUTS = ("snapshots", "session-events", "handoff-packages", ALERT_COMMANDS_BY_THREAD)
OUTPUTS = (
    "thread-state",
    "context-events",
    "alerts",
    "master-actions",
    "client-events",
    "deadletter",
    ALERT_COMMANDS_BY_THREAD,
)
RAW = {"key_type": bytes, "value_type": bytes}
"""Keys and values stay bytes (the app's serializers are raw); decoding and dead-lettering are ours."""
POLICY_CODEC = Codec(ThresholdPolicy)


def engine_config(settings: Settings) -> EngineConfig:
    return EngineConfig(
        stale_factor=settings.stale_factor,
        risk_horizon=timedelta(seconds=settings.risk_horizon_seconds),
        handoff_missing_grace=timedelta(seconds=settings.handoff_missing_grace_seconds),
        handoff_ttl=timedelta(seconds=settings.handoff_ttl_seconds),
    )


@dataclass
class Topology:
    app: faust.App
    settings: Settings


def build(settings: Settings) -> Topology:
    app = create_app(settings)
    config = engine_config(settings)
    prefix = settings.topic_prefix
    partitions = settings.topic_partitions

    def topic(*names: str) -> faust.TopicT:
        return app.topic(*(settings.topic(n) for n in names), partitions=partitions, **RAW)

    outputs = {name: topic(name) for name in OUTPUTS}

    # -- tables -----------------------------------------------------------------------------------------------------
    # Keyed by thread id with the same bytes and partitioner as the input topics, so `use_partitioner` puts each
    # changelog record on the partition that owns the thread; that lets batches and timers write outside per-event
    # iteration.
    thread_slots = app.Table("thread-slots", partitions=partitions, use_partitioner=True, default=None, **RAW)
    policies = app.GlobalTable("policies", partitions=partitions, default=None, **RAW)
    policy_cache: dict[bytes, ThresholdPolicy] = {}

    def policy_for(project_id: str) -> ThresholdPolicy:
        raw = policies.get(project_id.encode()) or policies.get(DEFAULT_POLICY_PROJECT_ID.encode())
        if raw is None:
            return DEFAULT_POLICY
        if raw not in policy_cache:
            policy_cache[raw] = POLICY_CODEC.decode(raw)  # validated before it was stored
        return policy_cache[raw]

    def load_slot(thread_id: str) -> ThreadSlot | None:
        raw = thread_slots.get(thread_id.encode())
        return SLOT_CODEC.decode(raw) if raw is not None else None

    async def publish(result: BatchResult) -> None:
        for thread_id, slot in result.slots.items():
            thread_slots[thread_id.encode()] = encode_record(slot)
        for emit in result.emits:
            await outputs[emit.topic].send(key=emit.key.encode(), value=encode_record(emit.record))

    # -- agents -----------------------------------------------------------------------------------------------------
    @app.agent(topic("alert-commands"), name="route_alert_commands")
    async def route_alert_commands(stream: faust.StreamT) -> None:
        """Re-key acks by the thread that owns the alert (a repartition), so the engine sees them in order."""
        async for event in stream.events():
            message = _message(event, prefix)
            try:
                command = Codec(AlertCommand).decode(message.value)
            except DecodeError as error:
                await _send_dead_letter(outputs, message, error, prefix)
                continue
            await outputs[ALERT_COMMANDS_BY_THREAD].send(key=command.thread_id.encode(), value=message.value)

    @app.agent(topic("policies"), name="load_policies")
    async def load_policies(stream: faust.StreamT) -> None:
        """Validate policies and publish them to every worker through the global table."""
        async for event in stream.events():
            message = _message(event, prefix)
            try:
                policy = POLICY_CODEC.decode(message.value)
                if message.key != policy.project_id.encode():
                    raise DecodeError("key_mismatch", f"key {message.key!r} is not project {policy.project_id!r}")
            except DecodeError as error:
                await _send_dead_letter(outputs, message, error, prefix)
                continue
            policies[message.key] = message.value

    @app.agent(topic(*ENGINE_INPUTS), name="thread_engine")
    async def thread_engine(stream: faust.StreamT) -> None:
        async for events in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            messages = [_message(event, prefix) for event in events]
            result = process_batch(messages, load_slot, policy_for, datetime.now(UTC), config, prefix)
            await publish(result)

    @app.timer(settings.tick_seconds, name="tick_threads")
    async def tick_threads() -> None:
        if app.rebalancing:
            return
        result = tick_all(_owned_slots(app, thread_slots, settings), datetime.now(UTC), config)
        await publish(result)

    return Topology(app=app, settings=settings)


def _message(event: faust.EventT, prefix: str) -> InputMessage:
    message = event.message
    return InputMessage(
        topic=message.topic.removeprefix(prefix),
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value,
    )


async def _send_dead_letter(outputs: dict, message: InputMessage, error: DecodeError, prefix: str) -> None:
    emit = dead_letter(message, error.reason, error.detail, datetime.now(UTC), prefix)
    await outputs[emit.topic].send(key=emit.key.encode(), value=encode_record(emit.record))


def _owned_slots(app: faust.App, table: faust.Table, settings: Settings) -> Iterator[tuple[str, ThreadSlot]]:
    """Slots of the threads whose input partitions this worker actively owns (not standby copies)."""
    snapshots = settings.topic("snapshots")
    owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == snapshots}
    for key, raw in list(table.items()):
        if raw is not None and (murmur2(key) & 0x7FFFFFFF) % settings.topic_partitions in owned:
            yield key.decode(), SLOT_CODEC.decode(raw)
