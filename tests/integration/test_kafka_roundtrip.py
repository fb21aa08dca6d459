"""A snapshot goes through a real Kafka topic and comes back as the same pydantic model."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from core.settings import Settings
from core.topics import TOPICS
from schemas import Codec, ThreadContextSnapshot
from streams.topic_admin import ensure_topics
from tests.samples import SNAPSHOT, dumps

pytestmark = pytest.mark.kafka


async def test_snapshot_round_trips_through_a_real_topic(settings: Settings) -> None:
    await ensure_topics(settings)
    codec = Codec(ThreadContextSnapshot)
    sent = [
        codec.decode(
            dumps({**SNAPSHOT, "snapshot_id": f"snap-{i}", "snapshot_version": i, "thread_id": f"thread-{i % 3}"})
        )
        for i in range(30)
    ]
    topic = settings.topic("snapshots")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for snapshot in sent:
            await producer.send(topic, codec.encode(snapshot), key=snapshot.thread_id.encode())
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    received: list[tuple[bytes, ThreadContextSnapshot]] = []
    try:
        while len(received) < len(sent):
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=30)
            for records in batches.values():
                received.extend((r.key, codec.decode(r.value)) for r in records)
    finally:
        await consumer.stop()

    assert sorted((s for _, s in received), key=lambda s: s.snapshot_version) == sent
    # Keyed by thread_id, so each thread's snapshots stay in order on one partition.
    for thread in {s.thread_id for s in sent}:
        versions = [s.snapshot_version for key, s in received if key == thread.encode()]
        assert versions == sorted(versions)


async def test_topics_are_created_once_with_declared_configs(settings: Settings) -> None:
    created = await ensure_topics(settings)
    assert sorted(created) == sorted(settings.topic(spec.name) for spec in TOPICS)
    assert await ensure_topics(settings) == []  # idempotent

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        described = {t["topic"]: t for t in await admin.describe_topics([settings.topic(s.name) for s in TOPICS])}
        for spec in TOPICS:
            assert len(described[settings.topic(spec.name)]["partitions"]) == settings.topic_partitions
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, settings.topic(spec.name)) for spec in TOPICS]
        )
    finally:
        await admin.close()

    configs = {
        resource[3]: {entry[0]: entry[1] for entry in resource[4]}
        for response in responses
        for resource in response.resources
    }
    for spec in TOPICS:
        actual = configs[settings.topic(spec.name)]
        assert {key: actual[key] for key in spec.configs()} == spec.configs(), spec.name
    assert configs[settings.topic("thread-state")]["cleanup.policy"] == "compact"
    assert configs[settings.topic("snapshots")]["cleanup.policy"] == "delete"
