"""The worker's agents by role, the policies' commit, and the alert-command repartition (re-keying acks,
dead-lettering bad ones).

The keyed folds' logic lives in pure batch functions tested directly (tests/unit/engine, projection, aggregates); their
Faust wiring needs a live consumer (offsets, generations, rebalances) and is tested on the real broker. The stateless
fold runs here in the in-memory runtime, through the topology's own declaration.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faust.types import TP

from core.folds import FOLDS
from core.settings import Settings
from schemas import DeadLetter
from streams.runtime.faust_fixes import track_progress
from streams.runtime.memory import MemoryRuntime
from streams.topology import WIRINGS, wire
from streams.worker import build
from tests.unit.engine.builders import T0, ack


def test_acks_are_rekeyed_by_their_thread_and_bad_ones_dead_lettered(tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles="engine")
    runtime = MemoryRuntime(settings, T0)
    wire(runtime, settings)
    command = ack("thread-a:context_watch:1", thread="thread-a")
    runtime.produce("alert-commands", command.alert_id, command)
    runtime.produce("alert-commands", "bad", b'{"alert_id": 7}')
    runtime.step("route_alert_commands", 10)
    rekeyed, dead = runtime.published
    assert (rekeyed.topic, rekeyed.key, rekeyed.record) == ("alert-commands-by-thread", "thread-a", command)
    assert dead.topic == "deadletter"
    assert isinstance(dead.record, DeadLetter)
    assert (dead.record.reason, dead.record.original_value) == ("validation_error", b'{"alert_id": 7}')


@pytest.mark.parametrize(
    ("roles", "agents"),
    [
        ("engine", {"load_policies", "load_compaction_points", "route_alert_commands", "thread_engine"}),
        ("projection", {"load_policies", "load_compaction_points", "thread_projection"}),
        ("aggregates", {
            "project_risk", "conversation_indicators", "route_compaction_samples", "learn_compaction_points",
        }),
        ("engine,projection,aggregates,sinks", {
            "load_policies", "route_alert_commands", "thread_engine", "thread_projection", "project_risk",
            "conversation_indicators", "load_compaction_points", "route_compaction_samples",
            "learn_compaction_points",
        }),
    ],
)  # fmt: skip
def test_a_worker_registers_the_agents_of_its_roles_only(roles: str, agents: set[str], tmp_path: Path) -> None:
    app = build(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path, roles=roles))
    assert set(app.agents) == agents


def test_the_policies_commit_waits_for_the_policy_table_not_only_the_sinks(tmp_path: Path) -> None:
    """All roles in one worker: the sink writing a policy record into ClickHouse must not commit it past the table
    every fold reads policies from, which may lag behind it or have dropped that record."""
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path)
    app = build(settings, clickhouse=object())  # type: ignore[arg-type]  # the sink only stores the client here
    progress = track_progress(app)
    policies = TP(settings.topic("policies"), 0)
    progress.done("clickhouse_sink", 1, policies, 10)  # the sink is ahead: ClickHouse holds offsets 0..9
    assert progress.committable(policies, 1) is None  # the policy table has applied nothing yet
    progress.done("load_policies", 1, policies, 4)
    assert progress.committable(policies, 1) == 4


def test_every_agent_commits_through_the_one_ledger(tmp_path: Path) -> None:
    """Policies, alert routing and the sinks too: no input of a worker is committed on Faust's acknowledgements."""
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path)
    app = build(settings, clickhouse=object())  # type: ignore[arg-type]  # the sink only stores the client here
    progress = track_progress(app)
    inputs = {topic for agent in app.agents.values() for topic in agent.channel.topics}  # type: ignore[attr-defined]
    assert {"ctx.policies", "ctx.alert-commands", "ctx.deadletter"} <= inputs
    assert [topic for topic in sorted(inputs) if not progress.handles(topic)] == []


def test_every_declared_fold_is_wired_and_nothing_else() -> None:
    assert list(WIRINGS) == [fold.name for fold in FOLDS]
