"""The whole stream topology: which fold runs where, with what.

Which topics feed which fold and which topics each fold writes is declared once, in `core/folds.py`; the graph
(topic -> fold -> table -> topic, by role) is printed from that declaration by `ctxbudget topology` (`--format
mermaid` for the README's diagram).

Each fold's table holds one state per key and is named after its agent (changelog `<group>-<agent>-changelog`).
All engine inputs are keyed by thread id and have the same partition count, so one agent sees every record of a
thread, in order, and is the only writer of its state. The domain logic lives in pure functions (`streams.engine`,
...); `streams.runtime.agents` holds the delivery discipline every stateful agent follows; this module only wires each
declared fold to its functions.

A worker runs every role unless `CTXBUDGET_ROLES` names some: processes with different roles then share the work,
each role set in a consumer group of its own, with its own table changelogs (`Settings.faust_app_id`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import faust
from clickhouse_connect.driver.client import Client

from core.engine_config import EngineConfig
from core.folds import (
    ALERT_COMMANDS_FOLD,
    ENGINE_FOLD,
    INDICATORS_FOLD,
    POLICIES_FOLD,
    PROJECTION_FOLD,
    PROJECTS_FOLD,
    ROUTES_FOLD,
    SINKS_FOLD,
    Fold,
)
from core.health import ClickHouseProbe
from core.profiles import ProfileSet
from core.settings import Settings
from core.topics import ALERT_COMMANDS_BY_THREAD
from schemas import DecodeError, ThresholdPolicy
from schemas.projection import restore_state
from sinks.tables import ROUTES
from streams import metrics
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
from streams.batching import Emit, InputMessage, dead_letter
from streams.engine.batch import ALERT_COMMAND_CODEC, SLOT_CODEC, process_batch, tick_all
from streams.engine.fold import next_deadline
from streams.projection.batch import Projection, projection_batch
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.runtime import observability
from streams.runtime.agents import RAW, OrderedIntake, Runtime
from streams.runtime.app import create_app
from streams.runtime.policy_table import POLICY_CODEC, PolicyTable
from streams.sink_agents import ClickHouseSink


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

    async def send_dead_letter(fold: Fold, message: InputMessage, error: DecodeError) -> None:
        await runtime.emit(fold, [dead_letter(message, error.reason, error.detail, datetime.now(UTC), prefix)])

    roles = settings.roles
    lookup_policy = _policies(app, runtime, send_dead_letter) if roles & {"engine", "projection"} else None

    # -- projection: session events -> projected tokens -> estimator snapshots (back into `snapshots`) ---------------
    if "projection" in roles:
        assert lookup_policy is not None
        projection = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), lookup_policy)
        metrics.watch_estimator(projection.estimator.stats)
        runtime.keyed_fold(
            PROJECTION_FOLD,
            restore_state,  # any stored fold version: an older one degrades to the raw sample
            batch=lambda messages, load, now: projection_batch(messages, load, now, projection, prefix),
        )

    # -- the thread budget engine; acks re-keyed by the thread that owns the alert, so the engine sees them in order --
    if "engine" in roles:
        assert lookup_policy is not None
        _route_alert_commands(app, runtime, send_dead_letter)
        config = engine_config(settings)
        runtime.keyed_fold(
            ENGINE_FOLD,
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
            ROUTES_FOLD,
            ROUTES_CODEC.decode,
            batch=lambda messages, load, now: routes_batch(messages, load, now, projects_config, prefix),
        )
        runtime.keyed_fold(
            PROJECTS_FOLD,
            PROJECT_CODEC.decode,
            batch=lambda messages, load, now: projects_batch(messages, load, now, projects_config, prefix),
            tick=lambda projects, now: retire_idle_projects(projects, now, projects_config),
        )
        runtime.keyed_fold(
            INDICATORS_FOLD,
            INDICATOR_CODEC.decode,
            batch=lambda messages, load, now: indicators_batch(messages, load, now, prefix),
        )

    # -- sinks: every routed topic into ClickHouse, batched per partition, effectively once -------------------------
    if "sinks" in roles and clickhouse is not None:
        routes = {topic: ROUTES[topic] for topic in SINKS_FOLD.inputs}
        ClickHouseSink(runtime, clickhouse, SINKS_FOLD.name, routes, backoff=metrics.CountedBackoff())

    return app


DeadLetter = Callable[[Fold, InputMessage, DecodeError], Awaitable[None]]


def _policies(
    app: faust.App, runtime: Runtime, send_dead_letter: DeadLetter
) -> Callable[[str], ThresholdPolicy | None]:
    """Policies, validated, then everywhere through a global table; returns the lookup by project id (a plain map
    of the decoded policies the table holds)."""
    fold = POLICIES_FOLD
    (topic,) = fold.inputs
    policies = PolicyTable.register(app, "policies", runtime.settings.topic_partitions, **RAW)

    # The policy table is a reader of `policies` like the sinks: the group commits a partition only once both are
    # past a record (runtime/progress.py), through the same ordered intake, so a record the table never applied is
    # read again instead of committed past on the sinks' word.
    settings = runtime.settings
    intake = OrderedIntake(runtime, fold.name, [settings.topic(topic)], busy=lambda: False)

    async def apply(events: list[faust.EventT]) -> None:
        valid: dict[bytes, bytes] = {}
        for event in events:
            message = runtime.message(event)
            try:
                policy = POLICY_CODEC.decode(message.value)
                if message.key != policy.project_id.encode():
                    raise DecodeError("key_mismatch", f"key {message.key!r} is not project {policy.project_id!r}")
            except DecodeError as error:
                await send_dead_letter(fold, message, error)
                continue
            assert message.value is not None  # a tombstone does not decode
            valid[policy.project_id.encode()] = message.value
        # The table's store changes once its changelog records are in Kafka (as for the keyed folds' tables).
        changelog = policies.changelog_topic.get_topic_name()
        await runtime.produce((changelog, key, value) for key, value in valid.items())
        for key, value in valid.items():
            policies.put(key, value)

    @app.agent(runtime.topic(topic), name=fold.name)
    async def load_policies(stream: faust.StreamT) -> None:
        async for events in intake.batches(stream, settings.batch_size, settings.batch_seconds):
            await intake.run(stream, events, apply)

    return policies.mirror.get


def _route_alert_commands(app: faust.App, runtime: Runtime, send_dead_letter: DeadLetter) -> None:
    """Acks re-keyed by the thread that owns the alert (a repartition)."""

    fold = ALERT_COMMANDS_FOLD

    @app.agent(runtime.topic(*fold.inputs), name=fold.name)
    async def route_alert_commands(stream: faust.StreamT) -> None:
        async for event in stream.events():
            message = runtime.message(event)
            try:
                command = ALERT_COMMAND_CODEC.decode(message.value)
            except DecodeError as error:
                await send_dead_letter(fold, message, error)
                continue
            await runtime.emit(fold, [Emit(ALERT_COMMANDS_BY_THREAD, command.thread_id, command)])
