"""No input may stop a partition: an output Kafka would refuse (over its topic's `max.message.bytes`) is not sent, its
input is dead-lettered with the cause and the rest of the batch applied (issue 38, 1). The largest package the API
takes fits every output it causes."""

from __future__ import annotations

from datetime import timedelta

from core.engine_config import EngineConfig
from core.topics import MAX_INPUT_BYTES, MAX_MESSAGE_BYTES
from schemas import HandoffPackage
from schemas.codec import encode_record
from streams.batching import Encoded, InputMessage, bounded_batch
from streams.engine.batch import process_batch
from tests.unit.engine.builders import T0, package, snapshot

NOW = T0 + timedelta(minutes=1)
CONFIG = EngineConfig()


def big_package(thread: str, weight: int) -> HandoffPackage:
    """A ready package of about `weight` bytes, in open questions (the checklist copies them into the state)."""
    items = weight // 4003  # each question and its quotes and comma
    return package(thread=thread).model_copy(update={"open_questions": [f"{i:04}" + "q" * 3990 for i in range(items)]})


def message(topic: str, record, offset: int) -> InputMessage:
    thread = record.from_thread_id if isinstance(record, HandoffPackage) else record.thread_id
    return InputMessage(topic, 0, offset, thread.encode(), encode_record(record))


def engine(messages: list[InputMessage]):
    return bounded_batch(
        lambda batch, load, now: process_batch(batch, load, lambda _: None, now, CONFIG, "ctx."),
        messages,
        lambda _: None,
        NOW,
        "ctx.",
    )


def test_the_largest_package_the_api_takes_fits_every_output_it_causes() -> None:
    largest = big_package("thread-a", MAX_INPUT_BYTES - 1000)
    assert MAX_INPUT_BYTES - 8000 < len(encode_record(largest)) <= MAX_INPUT_BYTES
    result, encoded = engine([message("snapshots", snapshot(20), 0), message("handoff-packages", largest, 1)])
    assert [e for e in result.emits if e.topic == "deadletter"] == []
    assert result.states["thread-a"].state.handoff == largest
    assert encoded.too_large() is None
    assert max(len(value) for _, value, _ in encoded.states) > 2 * MAX_INPUT_BYTES - 50_000  # twice: package, checklist


def test_an_input_whose_outputs_kafka_would_refuse_is_dead_lettered_and_the_rest_applied() -> None:
    huge = big_package("thread-a", 3 * MAX_INPUT_BYTES)  # fits a topic (4 MiB), its outputs (twice that) do not
    assert len(encode_record(huge)) < MAX_MESSAGE_BYTES
    messages = [
        message("snapshots", snapshot(60, version=1), 0),
        message("handoff-packages", huge, 1),
        message("snapshots", snapshot(50, version=2, seconds=10), 2),
        message("snapshots", snapshot(40, thread="thread-b"), 3),
    ]
    result, encoded = engine(messages)
    (letter,) = [e.record for e in result.emits if e.topic == "deadletter"]
    assert (letter.reason, letter.offset, letter.original_value) == ("output_too_large", 1, messages[1].value)
    assert letter.detail.endswith("bytes, over the 4194304 Kafka takes")
    assert result.outcomes["output_too_large"] == 1
    thread_a = result.states["thread-a"].state
    assert (thread_a.context_budget_remaining_pct, thread_a.handoff) == (50, None)  # before and after it applied
    assert result.states["thread-b"].state.context_budget_remaining_pct == 40
    assert encoded == Encoded.of(result)
    assert encoded.too_large() is None
