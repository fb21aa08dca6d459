"""Conversation ring markers through the routing and indicator folds: one event per visible change, none otherwise,
stale marked, groups hidden, and the same result whether a conversation is registered before or after its thread."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from schemas import ConversationContextIndicatorUpdated, ConversationItem, ConversationType
from streams.aggregates.outputs import CLIENT_EVENTS, CONVERSATION_INDICATORS, PROJECT_RISK
from streams.aggregates.resolution import ring_percent
from tests.unit.aggregates.builders import Feed, conversation, thread_state

SINGLE, GROUP, MASTER = ConversationType.SINGLE_DEVICE, ConversationType.GROUP, ConversationType.MASTER_AGENT


def ring_events(pipeline: Feed) -> list[ConversationContextIndicatorUpdated]:
    return [r for r in pipeline.of(CLIENT_EVENTS) if isinstance(r, ConversationContextIndicatorUpdated)]


def last_item(pipeline: Feed, conversation_id: str) -> ConversationItem:
    return [r for r in pipeline.of(CONVERSATION_INDICATORS) if r.conversation_id == conversation_id][-1]


def test_single_device_shows_its_thread_as_a_floored_ring() -> None:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-1", SINGLE, ["thread-a"]))
    pipeline.thread(thread_state("thread-a", 59.9, seconds=3, must_finish=True, node="mac-07"))
    item = last_item(pipeline, "conv-1")
    assert item.context_budget_indicator.model_dump() == {
        "schema_version": 1,
        "visible": True,
        "style": "ring_percent",
        "percent": 59,
        "level": "watch",
        "stale": False,
    }
    assert (item.context_budget_source_node_id, item.must_finish_before_compaction) == ("mac-07", True)
    assert item.context_budget_updated_at == thread_state(seconds=3).updated_at
    (event,) = ring_events(pipeline)
    assert event.event_id == "conv-1:thread-a:2026-03-25T08:00:03+00:00:indicator"
    assert event.context_budget_indicator == item.context_budget_indicator


def test_group_never_shows_a_ring_nor_sends_ring_events() -> None:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-g", GROUP, ["thread-a", "thread-b"]))
    pipeline.thread(thread_state("thread-a", 20))
    pipeline.thread(thread_state("thread-b", 90))
    assert last_item(pipeline, "conv-g").context_budget_indicator.visible is False
    assert ring_events(pipeline) == []


def test_master_agent_shows_its_current_main_thread() -> None:
    pipeline = Feed()
    pipeline.thread(thread_state("main-1", 30, seconds=0))
    pipeline.thread(thread_state("main-2", 95, seconds=1))
    pipeline.conversation(conversation("conv-m", MASTER, ["main-1"], seconds=2))
    assert last_item(pipeline, "conv-m").context_budget_indicator.percent == 30
    pipeline.conversation(conversation("conv-m", MASTER, ["main-2"], seconds=3))
    assert last_item(pipeline, "conv-m").context_budget_indicator.percent == 95
    items = len(pipeline.of(CONVERSATION_INDICATORS))
    pipeline.thread(thread_state("main-1", 10, seconds=4))  # the old main thread no longer reaches the conversation
    assert len(pipeline.of(CONVERSATION_INDICATORS)) == items
    # between the switch and the new thread's values the ring is hidden: it never shows the old thread's number
    assert [e.context_budget_indicator.percent for e in ring_events(pipeline)] == [30, None, 95]


def test_stale_thread_keeps_its_last_value_marked_stale() -> None:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-1", SINGLE, ["thread-a"]))
    pipeline.thread(thread_state("thread-a", 42.0, seconds=0))
    pipeline.thread(thread_state("thread-a", 42.0, seconds=45, stale=True))
    pipeline.thread(thread_state("thread-a", 42.5, seconds=50))
    marks = [(e.context_budget_indicator.percent, e.context_budget_indicator.stale) for e in ring_events(pipeline)]
    assert marks == [(42, False), (42, True), (42, False)]


def test_must_finish_change_republishes_the_item_without_a_ring_event() -> None:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-1", SINGLE, ["thread-a"]))
    pipeline.thread(thread_state("thread-a", 70, seconds=0))
    pipeline.thread(thread_state("thread-a", 70, seconds=5, must_finish=True))
    assert last_item(pipeline, "conv-1").must_finish_before_compaction is True
    assert len(ring_events(pipeline)) == 1


@given(
    st.lists(
        st.tuples(st.floats(0, 100, allow_nan=False), st.booleans(), st.booleans()),
        min_size=1,
        max_size=30,
    )
)
def test_exactly_one_ring_event_per_visible_change(steps: list[tuple[float, bool, bool]]) -> None:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-1", SINGLE, ["thread-a"]))
    for i, (pct, stale, must_finish) in enumerate(steps):
        pipeline.thread(thread_state("thread-a", pct, seconds=i + 1, stale=stale, must_finish=must_finish))
    seen = [(ring_percent(p), thread_state(pct=p).context_budget_level, s) for p, s, _ in steps]
    changes = 1 + sum(a != b for a, b in pairwise(seen))
    assert len(ring_events(pipeline)) == changes
    indicator = last_item(pipeline, "conv-1").context_budget_indicator
    assert (indicator.percent, indicator.level, indicator.stale) == seen[-1]


def run(order: str) -> Feed:
    """Two projects, five threads, the three kinds of conversation: registered before or after their threads."""
    pipeline = Feed()
    conversations = [
        conversation("conv-single", SINGLE, ["thread-a"], project="proj-1"),
        conversation("conv-group", GROUP, ["thread-a", "thread-b", "thread-c"], project="proj-1"),
        conversation("conv-master", MASTER, ["thread-m"], project="proj-2"),
    ]
    threads = [
        thread_state("thread-a", 55.5, project="proj-1", seconds=10),
        thread_state("thread-b", 30, project="proj-1", seconds=11),
        thread_state("thread-c", 12, project="proj-1", seconds=12),
        thread_state("thread-m", 88, project="proj-2", seconds=13),
        thread_state("thread-d", 64, project="proj-2", seconds=14),
    ]
    for entry in conversations if order == "before" else []:
        pipeline.conversation(entry)
    for state in threads:
        pipeline.thread(state)
    for entry in conversations if order == "after" else []:
        pipeline.conversation(entry)
    return pipeline


def test_conversations_registered_before_or_after_their_threads_end_the_same() -> None:
    before, after = run("before"), run("after")
    for conversation_id in ("conv-single", "conv-group", "conv-master"):
        assert last_item(before, conversation_id) == last_item(after, conversation_id)
    assert [(e.conversation_id, e.event_id, e.context_budget_indicator) for e in ring_events(before)] == [
        (e.conversation_id, e.event_id, e.context_budget_indicator) for e in ring_events(after)
    ]
    assert [e.context_budget_indicator.percent for e in ring_events(before)] == [55, 88]
    assert before.projects == after.projects


def test_a_thread_moving_project_leaves_the_old_view() -> None:
    pipeline = Feed()
    pipeline.thread(thread_state("thread-a", 20, project="proj-1", seconds=0))
    pipeline.thread(thread_state("thread-a", 20, project="proj-2", seconds=5))
    views = {e.key: e.record for e in pipeline.published if e.topic == PROJECT_RISK}
    assert views["proj-1"].active_thread_contexts == []
    assert [t.thread_id for t in views["proj-2"].active_thread_contexts] == ["thread-a"]
