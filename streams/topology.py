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
benchmarks, and `streams.worker.build` runs it in a worker. `wire` is a loop over the declaration (`core.folds.FOLDS`):
each fold of the worker's roles, in order, wired by its entry of `WIRINGS`.

A worker runs every role unless `CTXBUDGET_ROLES` names some: processes with different roles then share the work,
each role set in a consumer group of its own, with its own table changelogs (`Settings.faust_app_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from clickhouse_connect.driver.client import Client

from core.engine_config import EngineConfig
from core.fleet_points import PointLookup
from core.folds import (
    ALERT_COMMANDS_FOLD,
    COMPACTION_POINTS_FOLD,
    ENGINE_FOLD,
    FOLDS,
    INDICATORS_FOLD,
    LEARNED_POINTS_FOLD,
    POLICIES_FOLD,
    PROJECTION_FOLD,
    PROJECTS_FOLD,
    ROUTE_COMPACTIONS_FOLD,
    SINKS_FOLD,
    Fold,
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
_Table = TypeVar("_Table")


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
    """Declare the folds of `settings.roles` on `runtime` (the Faust one, `streams.worker.build`, or the in-memory
    one), in the declaration's order; with a `clickhouse` client (owned by the worker) the sinks write every route
    into it."""
    wiring = Wiring(runtime, settings, clickhouse)
    for fold in FOLDS:
        if fold.roles & settings.roles:
            WIRINGS[fold.name](fold, wiring)


@dataclass
class Wiring:
    """What the folds of one worker are wired with."""

    runtime: FoldRuntime
    settings: Settings
    clickhouse: Client | None
    policies: Callable[[str], ThresholdPolicy | None] | None = None
    """The policies' table, once its fold is wired (it comes first in every role that reads it)."""
    points: PointLookup | None = None
    """The fleet's learnt compaction points, once their fold is wired (before every fold that reads them)."""

    @property
    def lookup_policy(self) -> Callable[[str], ThresholdPolicy | None]:
        return _wired(self.policies, POLICIES_FOLD)

    @property
    def lookup_point(self) -> PointLookup:
        return _wired(self.points, LEARNED_POINTS_FOLD)

    @property
    def prefix(self) -> str:
        return self.settings.topic_prefix

    @property
    def projects(self) -> ProjectsConfig:
        return ProjectsConfig(retire_after=timedelta(seconds=self.settings.project_retire_seconds))


def _wired(table: _Table | None, fold: Fold) -> _Table:
    if table is None:
        raise RuntimeError(f"{fold.name} is wired after a fold that reads it (core/folds.py FOLDS)")
    return table


def _policies(fold: Fold, w: Wiring) -> None:
    w.policies = w.runtime.global_table(fold, POLICY_CODEC.decode, key_of=lambda policy: policy.project_id)


def _learned_points(fold: Fold, w: Wiring) -> None:
    w.points = w.runtime.global_table(fold, POINT_CODEC.decode, key_of=lambda point: point.point_key)


def _projection(fold: Fold, w: Wiring) -> None:
    """Session events -> projected tokens -> estimator snapshots (back into `snapshots`)."""
    projection = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), w.lookup_policy, w.lookup_point)
    prefix = w.prefix
    metrics.watch_estimator(projection.estimator.stats)
    w.runtime.keyed_fold(
        fold,
        restore_state,  # any stored fold version: an older one degrades to the raw sample
        batch=lambda messages, load, now: projection_batch(messages, load, now, projection, prefix),
    )


def _alert_commands(fold: Fold, w: Wiring) -> None:
    """Acks re-keyed by the thread that owns the alert, so the engine sees them in order."""
    prefix = w.prefix
    w.runtime.stateless_fold(fold, batch=lambda messages, now: route_alert_commands(messages, now, prefix))


def _engine(fold: Fold, w: Wiring) -> None:
    """The thread budget engine, its thread states routed in the same fold (`streams.engine.routing`)."""
    config, projects, prefix, lookup_policy = engine_config(w.settings), w.projects, w.prefix, w.lookup_policy
    lookup_point = w.lookup_point
    w.runtime.keyed_fold(
        fold,
        SLOT_CODEC.decode,
        batch=lambda messages, load, now: fused_batch(
            messages, load, lookup_policy, now, config, projects, prefix, lookup_point
        ),
        tick=lambda slots, now: fused_tick(slots, now, config, projects),
        wake=lambda slot, after: next_deadline(slot, after, config),
        census=lambda slots: metrics.publish_census(metrics.count_threads(s.state for s in slots if s.state)),
    )


def _projects(fold: Fold, w: Wiring) -> None:
    """Project risk, over what the engine's routing sent to projects."""
    config, prefix = w.projects, w.prefix
    w.runtime.keyed_fold(
        fold,
        PROJECT_CODEC.decode,
        batch=lambda messages, load, now: projects_batch(messages, load, now, config, prefix),
        tick=lambda projects, now: retire_idle_projects(projects, now, config),
    )


def _indicators(fold: Fold, w: Wiring) -> None:
    """Conversation indicators, over what the engine's routing sent to conversations."""
    prefix = w.prefix
    w.runtime.keyed_fold(
        fold, INDICATOR_CODEC.decode, batch=lambda messages, load, now: indicators_batch(messages, load, now, prefix)
    )


def _route_compactions(fold: Fold, w: Wiring) -> None:
    """Finished compactions re-keyed by the point they teach (`core.fleet_points`)."""
    prefix = w.prefix
    w.runtime.stateless_fold(fold, batch=lambda messages, now: route_compactions(messages, now, prefix))


def _compaction_points(fold: Fold, w: Wiring) -> None:
    """The fleet's compaction point per key, learnt from those compactions; a move told to the projects concerned."""
    profiles, prefix = ProfileSet(), w.prefix
    w.runtime.keyed_fold(
        fold,
        POINT_CODEC.decode,
        batch=lambda messages, load, now: points_batch(messages, load, now, profiles, prefix),
    )


def _sinks(fold: Fold, w: Wiring) -> None:
    """Every routed topic into ClickHouse, batched per partition, effectively once."""
    settings = w.settings
    routes = {topic: ROUTES[topic] for topic in fold.inputs}
    batching = (settings.sink_batch_rows, settings.sink_batch_ms, metrics.CountedBackoff())
    writer = None if w.clickhouse is None else ClickHouseWriter(w.clickhouse, routes, w.prefix, *batching)
    w.runtime.sink(fold, writer)


WIRINGS: dict[str, Callable[[Fold, Wiring], None]] = {
    POLICIES_FOLD.name: _policies,
    LEARNED_POINTS_FOLD.name: _learned_points,
    PROJECTION_FOLD.name: _projection,
    ALERT_COMMANDS_FOLD.name: _alert_commands,
    ENGINE_FOLD.name: _engine,
    PROJECTS_FOLD.name: _projects,
    INDICATORS_FOLD.name: _indicators,
    ROUTE_COMPACTIONS_FOLD.name: _route_compactions,
    COMPACTION_POINTS_FOLD.name: _compaction_points,
    SINKS_FOLD.name: _sinks,
}
"""Each declared fold (`core.folds.FOLDS`, by name) to the pure functions it runs."""
