"""Batched sends land where aiokafka's own per-record send puts each key, in order, every record acknowledged."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from core.settings import Settings
from streams.runtime.produce import produce
from streams.topic_admin import ensure_topics

pytestmark = pytest.mark.kafka


async def test_batched_records_go_to_the_keys_partitions_in_order(settings: Settings) -> None:
    settings = settings.model_copy(update={"topic_partitions": 5})
    await ensure_topics(settings)
    batched, single = settings.topic("thread-state"), settings.topic("alerts")
    keys = [f"thread-{i}".encode() for i in range(40)]
    # 25 rounds over 40 keys, plus values past aiokafka's 16 KB batch size: full batches roll over, and a record
    # bigger than a batch still goes alone
    records = [(batched, key, f"{key.decode()}:{n}".encode() + b"." * (20_000 if n == 3 else 50)) for n in range(25)
               for key in keys]  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        await produce(producer, records, {})
        sent_to = {key: (await (await producer.send(single, b"x", key=key))).partition for key in keys}
    finally:
        await producer.stop()

    received = await _read(settings, batched, len(records))
    assert {key: partition for partition, key, _ in received} == sent_to
    for key in keys:  # each key's records in the order sent
        values = [value.split(b".")[0] for _, k, value in received if k == key]
        assert values == [f"{key.decode()}:{n}".encode() for n in range(25)]


async def _read(settings: Settings, topic: str, count: int) -> list[tuple[int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=settings.kafka_bootstrap_servers,
                                auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    await consumer.start()
    received: list[tuple[int, bytes, bytes]] = []
    try:
        while len(received) < count:
            for tp, batch in (await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=30)).items():
                received += [(tp.partition, record.key, record.value) for record in batch]
    finally:
        await consumer.stop()
    assert len(received) == count
    return received
