"""The whole stream topology at a glance: topic -> agent -> table -> topic, by role.

    engine, projection:
    policies [project_id]      -> load_policies        -> policies (global table)

    engine:
    alert-commands [alert_id]  -> route_alert_commands -> alert-commands-by-thread [thread_id]

    projection:
    session-events [thread_id]   \\ thread_projection -> table: projections
    thread-state [thread_id]     /                    -> snapshots (estimator), compactions, deadletter

    engine:
    snapshots [thread_id]          \\
    session-events [thread_id]      > thread_engine  -> table: thread slots
    handoff-packages [thread_id]   |  (+ timer)      -> thread-state, context-events, alerts, master-actions,
    alert-commands-by-thread      |                     client-events, snapshot-verdicts, deadletter
    master-action-commands       /

    aggregates:
    thread-state [thread_id]               \\ route_thread_state      -> table: thread routes
    conversation-links [thread_id]         |                         -> thread-state-by-project, conversation-threads
    task-importance [thread_id]            |
    handoff-packages [thread_id]           /                         (a consumed package: conversation-threads)
    thread-state-by-project [project_id]  -> project_risk (+ timer)  -> table: project states
                                                                     -> project-risk, client-events
    conversations [conversation_id]        \\ conversation_indicators -> table: indicator states
    conversation-threads [conversation_id] /                         -> conversation-indicators, conversation-links,
                                                                        client-events, conversations (spec 7.3 move)

    sinks:
    thread-state, alerts, context-events, ... (sinks.tables.ROUTES) -> clickhouse_sink (+ timer) -> ClickHouse tables

Each fold's table holds one state per key and is named after its agent (changelog `<group>-<agent>-changelog`).
All engine inputs are keyed by thread id and have the same partition count, so one agent sees every record of a
thread, in order, and is the only writer of its state. The domain logic lives in pure functions (`streams.engine`,
...); `streams.runtime` holds the one delivery discipline every stateful agent follows; this module only declares
which topics feed which fold.

A worker runs every role unless `CTXBUDGET_ROLES` names some: processes with different roles then share the work,
each role set in a consumer group of its own, with its own table changelogs (`Settings.faust_app_id`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import faust
from clickhouse_connect.driver.client import Client

from core.engine_config import EngineConfig
from core.health import ClickHouseProbe
from core.profiles import ProfileSet
from core.settings import Settings
from core.topics import ALERT_COMMANDS_BY_THREAD, HANDOFF_PACKAGES, MASTER_ACTION_COMMANDS, SESSION_EVENTS, SNAPSHOTS
from schemas import DecodeError, ThresholdPolicy
from schemas.projection import restore_state
from streams import metrics, observability
from streams.app import create_app
from streams.batching import Emit, InputMessage, dead_letter
from streams.engine.batch import ALERT_COMMAND_CODEC, SLOT_CODEC, process_batch, tick_all
from streams.engine.fold import next_deadline
from streams.policy_table import POLICY_CODEC, PolicyTable
from streams.projection.batch import PROJECTION_INPUTS, Projection, projection_batch
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.projects.batch import (
    INDICATOR_CODEC,
    INDICATOR_INPUTS,
    PROJECT_CODEC,
    PROJECT_INPUTS,
    ROUTES_CODEC,
    ROUTES_INPUTS,
    indicators_batch,
    projects_batch,
    retire_idle_projects,
    routes_batch,
)
from streams.projects.config import ProjectsConfig
from streams.runtime import RAW, OrderedIntake, Runtime
from streams.sink_agents import ClickHouseSink

ENGINE_INPUTS = (SNAPSHOTS, SESSION_EVENTS, HANDOFF_PACKAGES, ALERT_COMMANDS_BY_THREAD, MASTER_ACTION_COMMANDS)


def engine_config(settings: Settings) -> EngineConfig:
    return EngineConfig(
        stale_factor=settings.stale_factor,
        risk_horizon=timedelta(seconds=settings.risk_horizon_seconds),
        handoff_missing_grace=timedelta(seconds=settings.handoff_missing_grace_seconds),
        handoff_ttl=timedelta(seconds=settings.handoff_ttl_seconds),
    )


def build(settings: Settings, clickhouse: Client | None = None) -> faust.App:
    """The worker's app with the agents of `settings.roles`; with a `clickhouse` client (owned by the worker) the
    sinks write every route into it."""
    app = create_app(settings)
    runtime = Runtime(app, settings)
    observability.install(app, settings, ClickHouseProbe.of(clickhouse) if clickhouse is not None else None)
    prefix = settings.topic_prefix

    async def send_dead_letter(message: InputMessage, error: DecodeError) -> None:
        await runtime.send([dead_letter(message, error.reason, error.detail, datetime.now(UTC), prefix)])

    roles = settings.roles
    lookup_policy = _policies(app, runtime, send_dead_letter) if roles & {"engine", "projection"} else None

    # -- projection: session events -> projected tokens -> estimator snapshots (back into `snapshots`) ---------------
    if "projection" in roles:
        assert lookup_policy is not None
        projection = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), lookup_policy)
        metrics.watch_estimator(projection.estimator.stats)
        runtime.keyed_fold(
            "thread_projection",
            PROJECTION_INPUTS,
            restore_state,  # any stored fold version: an older one degrades to the raw sample
            batch=lambda messages, load, now: projection_batch(messages, load, now, projection, prefix),
        )

    # -- the thread budget engine; acks re-keyed by the thread that owns the alert, so the engine sees them in order --
    if "engine" in roles:
        assert lookup_policy is not None
        _route_alert_commands(app, runtime, send_dead_letter)
        config = engine_config(settings)
        runtime.keyed_fold(
            "thread_engine",
            ENGINE_INPUTS,
            SLOT_CODEC.decode,
            batch=lambda messages, load, now: process_batch(messages, load, lookup_policy, now, config, prefix),
            tick=lambda slots, now: tick_all(slots, now, config),
            wake=lambda slot, after: next_deadline(slot, after, config),
            census=lambda slots: metrics.publish_census(metrics.count_threads(s.state for s in slots if s.state)),
        )

    # -- project risk and conversation indicators: thread state fanned out to projects and conversations -------------
    if "aggregates" in roles:
        projects_config = ProjectsConfig(retire_after=timedelta(seconds=settings.project_retire_seconds))
        runtime.keyed_fold(
            "route_thread_state",
            ROUTES_INPUTS,
            ROUTES_CODEC.decode,
            batch=lambda messages, load, now: routes_batch(messages, load, now, projects_config, prefix),
        )
        runtime.keyed_fold(
            "project_risk",
            PROJECT_INPUTS,
            PROJECT_CODEC.decode,
            batch=lambda messages, load, now: projects_batch(messages, load, now, projects_config, prefix),
            tick=lambda projects, now: retire_idle_projects(projects, now, projects_config),
        )
        runtime.keyed_fold(
            "conversation_indicators",
            INDICATOR_INPUTS,
            INDICATOR_CODEC.decode,
            batch=lambda messages, load, now: indicators_batch(messages, load, now, prefix),
        )

    # -- sinks: every routed topic into ClickHouse, batched per partition, effectively once -------------------------
    if "sinks" in roles and clickhouse is not None:
        ClickHouseSink(runtime, clickhouse, backoff=metrics.CountedBackoff())

    return app


DeadLetter = Callable[[InputMessage, DecodeError], Awaitable[None]]


def _policies(
    app: faust.App, runtime: Runtime, send_dead_letter: DeadLetter
) -> Callable[[str], ThresholdPolicy | None]:
    """Policies, validated, then everywhere through a global table; returns the lookup by project id (a plain map
    of the decoded policies the table holds)."""
    policies = PolicyTable.register(app, "policies", runtime.settings.topic_partitions, **RAW)

    # The policy table is a reader of `policies` like the sinks: the group commits a partition only once both are
    # past a record (streams/progress.py), through the same ordered intake, so a record the table never applied is
    # read again instead of committed past on the sinks' word.
    settings = runtime.settings
    intake = OrderedIntake(runtime, "load_policies", [settings.topic("policies")], busy=lambda: False)

    async def apply(events: list[faust.EventT]) -> None:
        valid: dict[bytes, bytes] = {}
        for event in events:
            message = runtime.message(event)
            try:
                policy = POLICY_CODEC.decode(message.value)
                if message.key != policy.project_id.encode():
                    raise DecodeError("key_mismatch", f"key {message.key!r} is not project {policy.project_id!r}")
            except DecodeError as error:
                await send_dead_letter(message, error)
                continue
            assert message.value is not None  # a tombstone does not decode
            valid[policy.project_id.encode()] = message.value
        # The table's store changes once its changelog records are in Kafka (as for the keyed folds' tables).
        changelog = policies.changelog_topic.get_topic_name()
        await runtime.produce((changelog, key, value) for key, value in valid.items())
        for key, value in valid.items():
            policies.put(key, value)

    @app.agent(runtime.topic("policies"), name="load_policies")
    async def load_policies(stream: faust.StreamT) -> None:
        async for events in intake.batches(stream, settings.batch_size, settings.batch_seconds):
            await intake.run(stream, events, apply)

    return policies.mirror.get


def _route_alert_commands(app: faust.App, runtime: Runtime, send_dead_letter: DeadLetter) -> None:
    """Acks re-keyed by the thread that owns the alert (a repartition)."""

    @app.agent(runtime.topic("alert-commands"), name="route_alert_commands")
    async def route_alert_commands(stream: faust.StreamT) -> None:
        async for event in stream.events():
            message = runtime.message(event)
            try:
                command = ALERT_COMMAND_CODEC.decode(message.value)
            except DecodeError as error:
                await send_dead_letter(message, error)
                continue
            await runtime.send([Emit(ALERT_COMMANDS_BY_THREAD, command.thread_id, command)])
