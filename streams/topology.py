"""The whole stream topology: which fold runs where, with what.

Which topics feed which fold and which topics each fold writes is declared once, in `core/folds.py`; the graph
(topic -> fold -> table -> topic, by role) is printed from that declaration by `ctxbudget topology` (`--format
mermaid` for docs/architecture.md's diagram).

Each fold's table holds one state per key and is named after its agent (changelog `<group>-<agent>-changelog`).
All engine inputs are keyed by thread id and have the same partition count, so one agent sees every record of a
thread, in order, and is the only writer of its state. The domain logic lives in pure functions (`streams.engine`,
...); `streams.runtime` holds the delivery discipline every fold follows; this module only wires each
declared fold to its functions, against the runtime interface (`streams.runtime.protocol.FoldRuntime`): it knows
nothing of Faust, so the in-memory runtime (`streams.runtime.memory`) runs this very declaration in tests and
benchmarks, and `streams.runtime.worker.build` runs it in a worker.

A worker runs every role unless `CTXBUDGET_ROLES` names some: processes with different roles then share the work,
each role set in a consumer group of its own, with its own table changelogs (`Settings.faust_app_id`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client

from core.engine_config import EngineConfig
from core.fleet_points import no_points
from core.folds import (
    ALERT_COMMANDS_FOLD,
    COMPACTION_POINTS_FOLD,
    ENGINE_FOLD,
    INDICATORS_FOLD,
    LEARNED_POINTS_FOLD,
    POLICIES_FOLD,
    PROJECTION_FOLD,
    PROJECTS_FOLD,
    ROUTE_COMPACTIONS_FOLD,
    SINKS_FOLD,
)
from core.profiles import ProfileSet
from core.settings import Settings
from schemas import Codec, ThresholdPolicy
from schemas.projection import restore_state
from sinks.tables import ROUTES
from streams import metrics
from streams.aggregates.batch import (
    INDICATOR_CODEC,
    PROJECT_CODEC,
    indicators_batch,
    projects_batch,
    retire_idle_projects,
)
from streams.aggregates.config import ProjectsConfig
from streams.clickhouse_writer import ClickHouseWriter
from streams.compaction_points.batch import POINT_CODEC, points_batch, route_compactions
from streams.engine.alert_commands import route_alert_commands
from streams.engine.batch import SLOT_CODEC
from streams.engine.fold import next_deadline
from streams.engine.routing import fused_batch, fused_tick
from streams.projection.batch import Projection, projection_batch
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.runtime.memory import MemoryRuntime
from streams.runtime.protocol import FoldRuntime

POLICY_CODEC = Codec(ThresholdPolicy)


def engine_config(settings: Settings) -> EngineConfig:
    return EngineConfig(
        stale_factor=settings.stale_factor,
        risk_horizon=timedelta(seconds=settings.risk_horizon_seconds),
        handoff_missing_grace=timedelta(seconds=settings.handoff_missing_grace_seconds),
        handoff_ttl=timedelta(seconds=settings.handoff_ttl_seconds),
    )


def declared(settings: Settings) -> MemoryRuntime:
    """What the worker of `settings.roles` registers (its folds, their inputs, its tables), from the declaration
    itself, without Faust: the in-memory runtime, wired and never run."""
    runtime = MemoryRuntime(settings, datetime.now(UTC))
    wire(runtime, settings)
    return runtime


def wire(runtime: FoldRuntime, settings: Settings, clickhouse: Client | None = None) -> None:
    """Declare the folds of `settings.roles` on `runtime` (the Faust one, `streams.runtime.worker.build`, or the
    in-memory one); with a `clickhouse` client (owned by the worker) the sinks write every route into it."""
    prefix = settings.topic_prefix
    roles = settings.roles
    projects_config = ProjectsConfig(retire_after=timedelta(seconds=settings.project_retire_seconds))
    lookup_policy = (
        runtime.global_table(POLICIES_FOLD, POLICY_CODEC.decode, key_of=lambda policy: policy.project_id)
        if roles & {"engine", "projection"}
        else None
    )
    lookup_point = (
        runtime.global_table(LEARNED_POINTS_FOLD, POINT_CODEC.decode, key_of=lambda point: point.point_key)
        if roles & {"engine", "projection"}
        else no_points
    )

    # -- projection: session events -> projected tokens -> estimator snapshots (back into `snapshots`) ---------------
    if "projection" in roles:
        assert lookup_policy is not None
        projection = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), lookup_policy, lookup_point)
        metrics.watch_estimator(projection.estimator.stats)
        runtime.keyed_fold(
            PROJECTION_FOLD,
            restore_state,  # any stored fold version: an older one degrades to the raw sample
            batch=lambda messages, load, now: projection_batch(messages, load, now, projection, prefix),
        )

    # -- the thread budget engine; acks re-keyed by the thread that owns the alert, so the engine sees them in order --
    # -- its thread states routed in the same fold to their projects and conversations (`streams.engine.routing`) ---
    if "engine" in roles:
        assert lookup_policy is not None
        runtime.stateless_fold(
            ALERT_COMMANDS_FOLD, batch=lambda messages, now: route_alert_commands(messages, now, prefix)
        )
        config = engine_config(settings)
        runtime.keyed_fold(
            ENGINE_FOLD,
            SLOT_CODEC.decode,
            batch=lambda messages, load, now: fused_batch(
                messages, load, lookup_policy, now, config, projects_config, prefix, lookup_point
            ),
            tick=lambda slots, now: fused_tick(slots, now, config, projects_config),
            wake=lambda slot, after: next_deadline(slot, after, config),
            census=lambda slots: metrics.publish_census(metrics.count_threads(s.state for s in slots if s.state)),
        )

    # -- project risk and conversation indicators, over what the engine's routing sent to projects and conversations --
    if "aggregates" in roles:
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

    # -- the fleet's compaction points: finished compactions re-keyed by the point they teach, learned per point ---
    if "aggregates" in roles:
        runtime.stateless_fold(
            ROUTE_COMPACTIONS_FOLD, batch=lambda messages, now: route_compactions(messages, now, prefix)
        )
        profiles = ProfileSet()
        runtime.keyed_fold(
            COMPACTION_POINTS_FOLD,
            POINT_CODEC.decode,
            batch=lambda messages, load, now: points_batch(messages, load, now, profiles, prefix),
        )

    # -- sinks: every routed topic into ClickHouse, batched per partition, effectively once -------------------------
    if "sinks" in roles:
        routes = {topic: ROUTES[topic] for topic in SINKS_FOLD.inputs}
        batching = (settings.sink_batch_rows, settings.sink_batch_ms, metrics.CountedBackoff())
        writer = None if clickhouse is None else ClickHouseWriter(clickhouse, routes, prefix, *batching)
        runtime.sink(SINKS_FOLD, writer)
