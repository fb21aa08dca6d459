"""Spec 7.3: a package of a master conversation's main thread, consumed into a relay thread, moves the conversation
to the relay; its ring then shows the relay's budget, and the moved entry goes back onto the registry. Other
conversation types, other package versions and a replayed consume change nothing."""

from __future__ import annotations

from datetime import timedelta

from core.topics import HANDOFF_PACKAGES
from schemas import Conversation, ConversationType, HandoffPackage, PackageStatus
from streams.aggregates.outputs import CONVERSATION_INDICATORS, CONVERSATIONS
from tests.unit.aggregates.builders import T0, Feed, aggregates, at, conversation, thread_state

SINGLE, MASTER = ConversationType.SINGLE_DEVICE, ConversationType.MASTER_AGENT


def consumed(from_thread: str = "thread-main", to_thread: str = "thread-relay", seconds: float = 10) -> HandoffPackage:
    ready = thread_state(from_thread, 12.0, handoff_ready=True).handoff
    assert ready is not None
    return ready.model_copy(
        update={"package_status": PackageStatus.CONSUMED, "to_thread_id": to_thread, "consumed_at": at(seconds)}
    )


def _fleet(kind: ConversationType) -> Feed:
    pipeline = Feed()
    pipeline.conversation(conversation("conv-m", kind, ["thread-main"]))
    pipeline.thread(thread_state("thread-main", 12.0, seconds=1, node="mac-01"))
    pipeline.thread(thread_state("thread-relay", 95.0, seconds=2, node="mac-02"))
    return pipeline


def _ring(pipeline: Feed) -> tuple[int | None, str | None]:
    item = [r for r in pipeline.of(CONVERSATION_INDICATORS) if r.conversation_id == "conv-m"][-1]
    return item.context_budget_indicator.percent, item.context_budget_source_node_id


def test_consuming_the_main_threads_package_moves_a_master_conversation_to_the_relay() -> None:
    pipeline = _fleet(MASTER)
    assert _ring(pipeline) == (12, "mac-01")
    pipeline.package(consumed())
    assert _ring(pipeline) == (95, "mac-02")
    (moved,) = pipeline.of(CONVERSATIONS)
    assert isinstance(moved, Conversation)
    assert (moved.thread_ids, moved.updated_at) == (["thread-relay"], at(10))
    assert pipeline.routes("thread-relay").conversation_ids == ["conv-m"]
    assert pipeline.routes("thread-main").conversation_ids == []


def test_the_moved_conversation_follows_the_relay_not_the_old_thread() -> None:
    pipeline = _fleet(MASTER)
    pipeline.package(consumed())
    pipeline.thread(thread_state("thread-main", 5.0, seconds=20))
    assert _ring(pipeline) == (95, "mac-02")
    pipeline.thread(thread_state("thread-relay", 88.0, seconds=21, node="mac-02"))
    assert _ring(pipeline) == (88, "mac-02")


def test_a_single_device_conversation_keeps_its_thread() -> None:
    pipeline = _fleet(SINGLE)
    pipeline.package(consumed())
    assert _ring(pipeline) == (12, "mac-01")
    assert pipeline.of(CONVERSATIONS) == []


def test_a_ready_package_or_a_replayed_consume_moves_nothing_more() -> None:
    pipeline = _fleet(MASTER)
    ready = thread_state("thread-main", 12.0, handoff_ready=True).handoff
    assert ready is not None
    assert pipeline.package(ready) == []
    pipeline.package(consumed())
    published = len(pipeline.published)
    pipeline.package(consumed())  # the old thread no longer links the conversation: nobody hears of it
    assert len(pipeline.published) == published


def test_a_relay_for_a_thread_the_conversation_no_longer_shows_is_ignored() -> None:
    pipeline = _fleet(MASTER)
    pipeline.conversation(conversation("conv-m", MASTER, ["thread-other"], seconds=5))
    pipeline.package(consumed())
    assert pipeline.of(CONVERSATIONS) == []


def test_through_the_batch_folds_the_move_reaches_the_registry_topic() -> None:
    topics = aggregates(T0 + timedelta(seconds=30))
    topics.produce("conversations", "conv-m", conversation("conv-m", MASTER, ["thread-main"]))
    topics.produce("thread-state", "thread-main", thread_state("thread-main", 12.0, seconds=1))
    topics.produce("thread-state", "thread-relay", thread_state("thread-relay", 95.0, seconds=2, node="mac-02"))
    topics.drain()
    topics.produce(HANDOFF_PACKAGES, "thread-main", consumed())
    topics.drain()
    assert topics.latest(CONVERSATIONS)["conv-m"].thread_ids == ["thread-relay"]
    item = topics.latest(CONVERSATION_INDICATORS)["conv-m"]
    assert item.context_budget_indicator.percent == 95
