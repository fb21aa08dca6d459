"""The aggregates role as the topology declares it, run by the in-memory runtime: records as bytes, tables as bytes,
internal topics between folds, batches of any size interleaved in any order. They converge on what one input at a
time, each drained before the next and folded at its own time (`Feed`), publishes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.topics import THREAD_STATE
from schemas import Conversation, ConversationType, DeadLetter, Record, ThreadState
from streams.aggregates.batch import CONVERSATIONS
from streams.aggregates.outputs import CONVERSATION_INDICATORS, PROJECT_RISK
from streams.batching import DEADLETTER
from streams.runtime.memory import MemoryRuntime
from tests.unit.aggregates.builders import CONFIG, Feed, aggregates, at, conversation, thread_state

NOW = at(60)
SINGLE, GROUP, MASTER = ConversationType.SINGLE_DEVICE, ConversationType.GROUP, ConversationType.MASTER_AGENT


def scenario() -> list[ThreadState | Conversation]:
    """Two projects, five threads, three conversations (one registered before its thread, two after), a master that
    switches main thread, a thread moving between levels and one moving to the other project."""
    return [
        conversation("conv-single", SINGLE, ["a"], seconds=0),
        thread_state("a", 82, seconds=1),
        thread_state("b", 45, seconds=2, expected_at=600),
        thread_state("c", 30, seconds=3, must_finish=True),
        thread_state("m1", 70, project="proj-2", seconds=4),
        thread_state("m2", 95, project="proj-2", seconds=5),
        conversation("conv-group", GROUP, ["a", "b", "c"], seconds=6),
        conversation("conv-master", MASTER, ["m1"], project="proj-2", seconds=7),
        thread_state("a", 55, seconds=8),
        thread_state("a", 35, seconds=9, must_finish=True),
        conversation("conv-master", MASTER, ["m2"], project="proj-2", seconds=10),
        thread_state("c", 28, project="proj-2", seconds=11, must_finish=True),
        thread_state("m2", 93.4, project="proj-2", seconds=12),
    ]


def feed(records: list[ThreadState | Conversation]) -> tuple[Feed, MemoryRuntime]:
    pipeline, topology = Feed(), aggregates(NOW)
    for record in records:
        if isinstance(record, ThreadState):
            pipeline.thread(record)
            topology.produce(THREAD_STATE, record.thread_id, record)
        else:
            pipeline.conversation(record)
            topology.produce(CONVERSATIONS, record.conversation_id, record)
    return pipeline, topology


def pipeline_latest(pipeline: Feed, topic: str) -> dict[str, Record]:
    return {e.key: e.record for e in pipeline.published if e.topic == topic}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_batching_and_interleaving_publishes_what_one_input_at_a_time_publishes(data: st.DataObject) -> None:
    pipeline, topology = feed(scenario())
    while pending := topology.pending():
        topology.step(data.draw(st.sampled_from(pending)), data.draw(st.integers(1, 4)))
    for topic in (PROJECT_RISK, CONVERSATION_INDICATORS):
        assert topology.latest(topic) == pipeline_latest(pipeline, topic)
    assert not [e for e in topology.published if e.topic == DEADLETTER]


def test_the_scenario_ends_with_each_project_ranked_and_each_ring_on_its_thread() -> None:
    _, topology = feed(scenario())
    topology.drain()
    risk = topology.latest(PROJECT_RISK)
    assert [t.thread_id for t in risk["proj-1"].active_thread_contexts] == ["a", "b"]
    assert [t.thread_id for t in risk["proj-2"].active_thread_contexts] == ["c", "m1", "m2"]
    assert risk["proj-2"].next_compaction_risk_thread_id == "c"
    rings = {k: (v.context_budget_indicator.visible, v.context_budget_indicator.percent)
             for k, v in topology.latest(CONVERSATION_INDICATORS).items()}  # fmt: skip
    assert rings == {"conv-single": (True, 35), "conv-group": (False, None), "conv-master": (True, 93)}


def test_invalid_registry_entries_are_dead_lettered() -> None:
    topology = aggregates(NOW)
    topology.produce(CONVERSATIONS, "conv-1", b'{"conversation_id": "conv-1"}')
    topology.produce(CONVERSATIONS, "conv-2", conversation("conv-1", SINGLE, ["a"]))
    topology.drain()
    dead = [e.record for e in topology.published if e.topic == DEADLETTER]
    assert all(isinstance(d, DeadLetter) for d in dead)
    assert [(d.source_topic, d.reason) for d in dead] == [
        ("ctx.conversations", "validation_error"),
        ("ctx.conversations", "key_mismatch"),
    ]


def test_the_timer_retires_threads_idle_past_the_configured_time_once() -> None:
    _, topology = feed([thread_state("a", 80, seconds=0), thread_state("b", 70, seconds=30)])
    topology.drain()
    topology.tick(at(CONFIG.retire_after.total_seconds() - 1))
    assert [t.thread_id for t in topology.latest(PROJECT_RISK)["proj-1"].active_thread_contexts] == ["a", "b"]
    topology.tick(at(CONFIG.retire_after.total_seconds()))
    topology.tick(at(CONFIG.retire_after.total_seconds() + 1))
    views = [e.record for e in topology.published if e.topic == PROJECT_RISK]
    assert [[t.thread_id for t in v.active_thread_contexts] for v in views] == [["a"], ["a", "b"], ["b"]]
