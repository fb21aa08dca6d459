"""The largest package the API takes reaches the thread's state, and an input whose outputs Kafka would refuse is
dead-lettered with the cause while the stream goes on, on a real broker (issue 38, 1: a 986,833-byte package made the
engine's thread-state record exceed the topic's 1 MB, and the fold crashed and rewound for good, republishing)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from core.settings import Settings
from core.topics import DEADLETTER_MAX_BYTES, MAX_INPUT_BYTES
from schemas.codec import encode_record
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, get_json
from tests.unit.engine.builders import snapshot
from tests.unit.engine.test_output_size import big_package

pytestmark = pytest.mark.kafka


async def test_a_package_at_the_api_limit_is_applied_and_one_too_large_for_its_outputs_is_dead_lettered(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    largest = big_package("thread-big", MAX_INPUT_BYTES - 1000)  # what the API accepts at most
    huge = big_package("thread-huge", 3 * MAX_INPUT_BYTES)  # only a raw Kafka writer could send this
    records = [
        ("snapshots", "thread-big", encode_record(snapshot(20, thread="thread-big"))),
        ("handoff-packages", "thread-big", encode_record(largest)),
        # versions given: the builders' default counts across the whole test session
        ("snapshots", "thread-huge", encode_record(snapshot(20, thread="thread-huge", version=1))),
        ("handoff-packages", "thread-huge", encode_record(huge)),
        ("snapshots", "thread-huge", encode_record(snapshot(15, thread="thread-huge", version=2, seconds=5))),
        ("snapshots", "thread-after", encode_record(snapshot(70, thread="thread-after"))),
    ]
    worker = WorkerProcess(settings, tmp_path / "worker").start()
    try:
        async with Outputs(settings) as outputs:
            producer = AIOKafkaProducer(
                bootstrap_servers=settings.kafka_bootstrap_servers, max_request_size=DEADLETTER_MAX_BYTES
            )
            await producer.start()
            try:
                for topic, key, value in records:
                    await producer.send_and_wait(settings.topic(topic), value, key=key.encode())
            finally:
                await producer.stop()

            def settled(o: Outputs) -> bool:
                states = o.latest_states()
                return (
                    states.get("thread-big", {}).get("handoff") is not None
                    and states.get("thread-huge", {}).get("context_budget_remaining_pct") == 15
                    and "thread-after" in states
                    and any(d["reason"] == "output_too_large" for d in o.records["deadletter"])
                )

            await outputs.wait_for(settled, within=120, what="the big package applied, the huge one dead-lettered")
            states = outputs.latest_states()
            assert len(states["thread-big"]["handoff"]["open_questions"]) == len(largest.open_questions)
            assert states["thread-huge"]["handoff"] is None
            (letter,) = outputs.records["deadletter"]
            assert letter["reason"] == "output_too_large"
            assert letter["source_topic"] == settings.topic("handoff-packages")
            assert "thread-state record for 'thread-huge'" in letter["detail"]
            # Nothing replays (the crash loop republished its batch every ~6 s): the dead letter stays one.
            await asyncio.sleep(8)
            assert len(outputs.records["deadletter"]) == 1
            readiness = await asyncio.to_thread(get_json, f"{worker.web}/readyz")
            assert readiness["checks"]["agents_applying"] is True, readiness
            assert readiness["ready"] is True, readiness
    finally:
        assert worker.stop() == 0, worker.output()
