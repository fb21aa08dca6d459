"""Every fold of the topology with the topics it reads and the topics it may write, declared once (names from
`core.topics`).

The runtime registers each agent from its declaration and refuses an emit to a topic the fold does not declare
(`streams.runtime.protocol.UndeclaredOutput`); `ctxbudget topology` draws the graph from it, and
docs/architecture.md's diagram is that drawing. The sinks write ClickHouse tables, not topics: their tables are
`sinks.tables.ROUTES`, whose topics are the sinks' declared inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Role
from core.topics import (
    ALERT_COMMANDS,
    ALERT_COMMANDS_BY_THREAD,
    ALERTS,
    CLIENT_EVENTS,
    COMPACTION_POINTS,
    COMPACTION_SAMPLES,
    COMPACTIONS,
    CONTEXT_EVENTS,
    CONVERSATION_INDICATORS,
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    CONVERSATIONS,
    DEADLETTER,
    HANDOFF_PACKAGES,
    MASTER_ACTION_COMMANDS,
    MASTER_ACTIONS,
    POLICIES,
    PROJECT_RISK,
    SESSION_EVENTS,
    SNAPSHOT_VERDICTS,
    SNAPSHOTS,
    TASK_IMPORTANCE,
    THREAD_PROJECTIONS,
    THREAD_STATE,
    THREAD_STATE_BY_PROJECT,
)


@dataclass(frozen=True)
class Fold:
    name: str
    """Its agent's name (a keyed fold's table is named alike)."""
    roles: frozenset[Role]
    """The worker roles that run it."""
    inputs: tuple[str, ...]
    """Keyed alike, with the same partition count: the first one owns the fold's partitions."""
    outputs: tuple[str, ...]
    """Every topic it may emit to."""
    table: str | None = None
    """What its table holds, one state per key (None: it keeps no table)."""
    timer: bool = False
    """A timer also folds its states (staleness, expiries, retirement), or flushes what is due."""
    clickhouse: bool = False
    """It writes its inputs into ClickHouse (the tables of `sinks.tables.ROUTES`)."""


def _roles(*names: Role) -> frozenset[Role]:
    return frozenset(names)


POLICIES_FOLD = Fold(
    "load_policies", _roles("engine", "projection"), (POLICIES,), (DEADLETTER,), table="policies (global table)"
)
ALERT_COMMANDS_FOLD = Fold(
    "route_alert_commands", _roles("engine"), (ALERT_COMMANDS,), (ALERT_COMMANDS_BY_THREAD, DEADLETTER)
)
PROJECTION_FOLD = Fold(
    "thread_projection",
    _roles("projection"),
    (SESSION_EVENTS, THREAD_STATE),
    (THREAD_PROJECTIONS, SNAPSHOTS, COMPACTIONS, DEADLETTER),
    table="projections",
)
ENGINE_FOLD = Fold(
    "thread_engine",
    _roles("engine"),
    (
        SNAPSHOTS,
        SESSION_EVENTS,
        HANDOFF_PACKAGES,
        ALERT_COMMANDS_BY_THREAD,
        MASTER_ACTION_COMMANDS,
        # the routing of its thread states runs in this fold (same key): what it needs of the aggregates
        CONVERSATION_LINKS,
        TASK_IMPORTANCE,
    ),
    (
        THREAD_STATE,
        CONTEXT_EVENTS,
        ALERTS,
        MASTER_ACTIONS,
        CLIENT_EVENTS,
        SNAPSHOT_VERDICTS,
        THREAD_STATE_BY_PROJECT,
        CONVERSATION_THREADS,
        DEADLETTER,
    ),
    table="thread slots and routes",
    timer=True,
)
PROJECTS_FOLD = Fold(
    "project_risk",
    _roles("aggregates"),
    (THREAD_STATE_BY_PROJECT,),
    (PROJECT_RISK, CLIENT_EVENTS, DEADLETTER),
    table="project states",
    timer=True,
)
INDICATORS_FOLD = Fold(
    "conversation_indicators",
    _roles("aggregates"),
    (CONVERSATIONS, CONVERSATION_THREADS),
    # `conversations`: a relay moves a thread to the conversation that continues it (spec 7.3)
    (CONVERSATION_INDICATORS, CONVERSATION_LINKS, CLIENT_EVENTS, CONVERSATIONS, DEADLETTER),
    table="indicator states",
)
# Where the fleet sees each tool compact (`core.fleet_points`): the finished compactions re-keyed by the point they
# teach, learned per point, read back as a global table by the projection
ROUTE_COMPACTIONS_FOLD = Fold(
    "route_compaction_samples", _roles("aggregates"), (COMPACTIONS,), (COMPACTION_SAMPLES, DEADLETTER)
)
COMPACTION_POINTS_FOLD = Fold(
    "learn_compaction_points",
    _roles("aggregates"),
    (COMPACTION_SAMPLES,),
    (COMPACTION_POINTS, CLIENT_EVENTS, DEADLETTER),
    table="compaction points",
)
LEARNED_POINTS_FOLD = Fold(
    "load_compaction_points",
    _roles("engine", "projection"),
    (COMPACTION_POINTS,),
    (DEADLETTER,),
    table="compaction points (global table)",
)
SINKS_FOLD = Fold(
    "clickhouse_sink",
    _roles("sinks"),
    (
        THREAD_STATE,
        ALERTS,
        CONVERSATION_INDICATORS,
        PROJECT_RISK,
        POLICIES,
        SNAPSHOT_VERDICTS,
        CONTEXT_EVENTS,
        CLIENT_EVENTS,
        COMPACTIONS,
        THREAD_PROJECTIONS,
        MASTER_ACTIONS,
        COMPACTION_POINTS,
        DEADLETTER,
    ),
    (),
    timer=True,
    clickhouse=True,
)

FOLDS: tuple[Fold, ...] = (
    POLICIES_FOLD,
    ALERT_COMMANDS_FOLD,
    ENGINE_FOLD,
    PROJECTION_FOLD,
    PROJECTS_FOLD,
    INDICATORS_FOLD,
    ROUTE_COMPACTIONS_FOLD,
    COMPACTION_POINTS_FOLD,
    LEARNED_POINTS_FOLD,
    SINKS_FOLD,
)
