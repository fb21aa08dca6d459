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

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import faust
from aiokafka.partitioner import murmur2

from schemas import Codec, DecodeError, ThresholdPolicy
from schemas.codec import encode_record
from streams.app import create_app
from streams.engine.batch import (
    ALERT_COMMAND_CODEC,
    ALERT_COMMANDS_BY_THREAD,
    HANDOFF_PACKAGES,
    SESSION_EVENTS,
    SLOT_CODEC,
    SNAPSHOTS,
    BatchResult,
    InputMessage,
    dead_letter,
    process_batch,
    tick_all,
)
from streams.engine.config import EngineConfig
from streams.engine.fold import Emit, ThreadSlot
from streams.settings import Settings

ENGINE_INPUTS = (SNAPSHOTS, SESSION_EVENTS, HANDOFF_PACKAGES, ALERT_COMMANDS_BY_THREAD)
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


def build(settings: Settings) -> faust.App:
    app = create_app(settings)
    config = engine_config(settings)
    prefix = settings.topic_prefix
    partitions = settings.topic_partitions

    def topic(*names: str) -> faust.TopicT:
        return app.topic(*(settings.topic(n) for n in names), partitions=partitions, **RAW)

    output_names = {name: settings.topic(name) for name in OUTPUTS}

    async def send_confirmed(emits: list[Emit]) -> None:
        """Send and wait for Kafka's acknowledgement of each record (Faust's Topic.send futures resolved earlier
        than that here: a SIGKILL then lost outputs whose slots were already written)."""
        producer = app.producer
        pending = [
            await producer.send(output_names[e.topic], e.key.encode(), encode_record(e.record), None, None, None)
            for e in emits
        ]
        await asyncio.gather(*pending)

    async def send_dead_letter(message: InputMessage, error: DecodeError) -> None:
        await send_confirmed([dead_letter(message, error.reason, error.detail, datetime.now(UTC), prefix)])

    # -- tables -----------------------------------------------------------------------------------------------------
    # Keyed by thread id with the same bytes and partitioner as the input topics, so `use_partitioner` puts each
    # changelog record on the partition that owns the thread; that lets batches and timers write outside per-event
    # iteration.
    thread_slots = app.Table("thread-slots", partitions=partitions, use_partitioner=True, default=None, **RAW)
    policies = app.GlobalTable("policies", partitions=partitions, default=None, **RAW)
    policy_cache: dict[bytes, ThresholdPolicy] = {}
    # The engine agent and the timer both read-modify-write slots, and publishing awaits Kafka in between:
    # without this lock a tick computed from an old slot could overwrite a batch's newer one.
    slot_writers = asyncio.Lock()

    def lookup_policy(project_id: str) -> ThresholdPolicy | None:
        raw = policies.get(project_id.encode())
        if raw is None:
            return None
        if raw not in policy_cache:
            policy_cache[raw] = POLICY_CODEC.decode(raw)  # validated before it was stored
        return policy_cache[raw]

    def load_slot(thread_id: str) -> ThreadSlot | None:
        raw = thread_slots.get(thread_id.encode())
        return SLOT_CODEC.decode(raw) if raw is not None else None

    async def publish(result: BatchResult) -> None:
        """Outputs first, confirmed, then the slots that produced them, confirmed; only then are inputs acked.

        A crash anywhere in between replays the batch: outputs repeat with the same ids, and nothing is lost. The
        other order could persist a slot whose outputs never left, and its replay would then emit nothing. Faust's
        own flush before committing offsets gives up on its buffer after 0.1 s, so we wait for delivery ourselves.
        """
        await send_confirmed(result.emits)
        for thread_id, slot in result.slots.items():
            thread_slots[thread_id.encode()] = encode_record(slot)
        if result.slots:
            await _delivered(app)

    # -- agents -----------------------------------------------------------------------------------------------------
    @app.agent(topic("alert-commands"), name="route_alert_commands")
    async def route_alert_commands(stream: faust.StreamT) -> None:
        """Re-key acks by the thread that owns the alert (a repartition), so the engine sees them in order."""
        async for event in stream.events():
            message = _message(event, prefix)
            try:
                command = ALERT_COMMAND_CODEC.decode(message.value)
            except DecodeError as error:
                await send_dead_letter(message, error)
                continue
            await send_confirmed([Emit(ALERT_COMMANDS_BY_THREAD, command.thread_id, command)])

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
                await send_dead_letter(message, error)
                continue
            policies[message.key] = message.value
            await _delivered(app)  # the event is acked when this returns: its changelog record must be in Kafka

    @app.agent(topic(*ENGINE_INPUTS), name="thread_engine")
    async def thread_engine(stream: faust.StreamT) -> None:
        async for events in stream.take_events(settings.batch_size, within=settings.batch_seconds):
            # take_events acks the whole batch in a `finally`, even when the agent is cancelled mid-batch (on a
            # rebalance or shutdown), which would commit offsets of records never published. Holding one more
            # reference per message makes that ack a no-op unless ours follows a completed publish.
            for event in events:
                event.message.incref()
            messages = [_message(event, prefix) for event in events]
            async with slot_writers:
                result = process_batch(messages, load_slot, lookup_policy, datetime.now(UTC), config, prefix)
                await publish(result)
            for event in events:
                await stream.ack(event)

    @app.timer(settings.tick_seconds, name="tick_threads")
    async def tick_threads() -> None:
        async with slot_writers:
            if app.rebalancing:
                return
            result = tick_all(_owned_slots(app, thread_slots, settings), datetime.now(UTC), config)
            await publish(result)

    return app


async def _delivered(app: faust.App) -> None:
    """Wait until every record handed to the producer (table changelogs included) is acknowledged by Kafka."""
    buffer = app.producer.buffer
    while buffer.size:
        await buffer.flush()
    await app.producer.flush()


def _message(event: faust.EventT, prefix: str) -> InputMessage:
    message = event.message
    return InputMessage(
        topic=message.topic.removeprefix(prefix),
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value,
    )


def _owned_slots(app: faust.App, table: faust.Table, settings: Settings) -> Iterator[tuple[str, ThreadSlot]]:
    """Slots of the threads whose input partitions this worker actively owns (not standby copies)."""
    snapshots = settings.topic("snapshots")
    owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == snapshots}
    for key, raw in list(table.items()):
        if raw is not None and (murmur2(key) & 0x7FFFFFFF) % settings.topic_partitions in owned:
            yield key.decode(), SLOT_CODEC.decode(raw)
