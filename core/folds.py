"""Every fold of the topology with the topics it reads and the topics it may write, declared once (names from
`core.topics`).

The runtime registers each agent from its declaration and refuses an emit to a topic the fold does not declare
(`streams.runtime.protocol.UndeclaredOutput`); `ctxbudget topology` draws the graph from it, and
docs/architecture.md's diagram is that drawing. A fold may chain processors that share its key (`chain`): each later
one takes what an earlier one emits to its inputs in process, with no hop through Kafka, and the fold reads the rest.
The sinks write ClickHouse tables, not topics: their tables are `sinks.tables.ROUTES`, whose topics are the sinks'
declared inputs.
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
class Processor:
    """One step of a fold's chain: the topics it reads (an earlier step's outputs among them) and may emit to."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


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
    chain: tuple[Processor, ...] = ()
    """The processors it runs in turn over each batch, when it chains several (`chain`)."""

    def handed(self, processor: Processor) -> tuple[str, ...]:
        """The inputs of `processor` that an earlier step of the chain emits: handed on in process, never read."""
        earlier = self.chain[: self.chain.index(processor)]
        return tuple(topic for topic in processor.inputs if any(topic in step.outputs for step in earlier))

    def own(self, processor: Processor) -> tuple[str, ...]:
        """The inputs the fold reads for `processor` alone (no earlier step reads or emits them)."""
        earlier = self.chain[: self.chain.index(processor)]
        return tuple(topic for topic in processor.inputs if not any(topic in (*s.inputs, *s.outputs) for s in earlier))

    def alone(self, processor: Processor) -> Fold:
        """`processor` as a fold of its own, reading from Kafka what the chain hands it in process: the fold the chain
        replaced, which tests and benchmarks check the chain against."""
        return Fold(processor.name, self.roles, processor.inputs, processor.outputs, table=f"{processor.name} states")


def _roles(*names: Role) -> frozenset[Role]:
    return frozenset(names)


def chain(name: str, roles: frozenset[Role], *processors: Processor, table: str, timer: bool = False) -> Fold:
    """One fold running `processors` in turn on each key: it reads their inputs but those an earlier one emits (the
    first processor's first input owns the partitions), and may emit all their outputs."""
    inputs: list[str] = []
    outputs: list[str] = []
    for processor in processors:
        inputs += [topic for topic in processor.inputs if topic not in inputs and topic not in outputs]
        outputs += [topic for topic in processor.outputs if topic not in outputs]
    return Fold(name, roles, tuple(inputs), tuple(outputs), table=table, timer=timer, chain=processors)


POLICIES_FOLD = Fold(
    "load_policies", _roles("engine", "projection"), (POLICIES,), (DEADLETTER,), table="policies (global table)"
)
LEARNED_POINTS_FOLD = Fold(
    "load_compaction_points",
    _roles("engine", "projection"),
    (COMPACTION_POINTS,),
    (DEADLETTER,),
    table="compaction points (global table)",
)
"""The fleet's learnt compaction points (`COMPACTION_POINTS_FOLD`) read back by every engine and projection worker."""
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
ENGINE = Processor(
    "engine",
    (SNAPSHOTS, SESSION_EVENTS, HANDOFF_PACKAGES, ALERT_COMMANDS_BY_THREAD, MASTER_ACTION_COMMANDS),
    (
        THREAD_STATE,
        CONTEXT_EVENTS,
        ALERTS,
        MASTER_ACTIONS,
        CLIENT_EVENTS,
        SNAPSHOT_VERDICTS,
        DEADLETTER,
    ),
)
"""The thread budget engine (`streams.engine.batch`)."""
ROUTING = Processor(
    "routing",
    (THREAD_STATE, CONVERSATION_LINKS, TASK_IMPORTANCE, HANDOFF_PACKAGES),
    (THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS, DEADLETTER),
)
"""Each thread's states to its project and the conversations that show it (`streams.aggregates.routes`)."""
ENGINE_FOLD = chain("thread_engine", _roles("engine"), ENGINE, ROUTING, table="thread slots and routes", timer=True)
"""The engine's thread states routed in the same fold (`streams.engine.routing`): same key, no hop through
`thread-state`, one state per thread (its routes in its slot)."""
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
# teach, learned per point (read back by `LEARNED_POINTS_FOLD`)
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
    LEARNED_POINTS_FOLD,
    PROJECTION_FOLD,
    ALERT_COMMANDS_FOLD,
    ENGINE_FOLD,
    PROJECTS_FOLD,
    INDICATORS_FOLD,
    ROUTE_COMPACTIONS_FOLD,
    COMPACTION_POINTS_FOLD,
    SINKS_FOLD,
)
"""Every fold, in the order a worker registers them (`streams.topology.wire` loops over it)."""
