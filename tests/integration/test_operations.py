"""Topic management and status on the real broker: idempotent create, drift, the group lag as Kafka sees it."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import OffsetAndMetadata

from core.settings import Settings
from streams.status import collect
from streams.topic_admin import create, declared_topics, describe

pytestmark = pytest.mark.kafka
TABLES = ["thread-slots"]


async def test_create_twice_is_a_no_op_and_describe_reports_an_altered_config(settings: Settings) -> None:
    declared = declared_topics(settings, TABLES)
    assert len(await create(settings, declared)) == len(declared)
    assert await create(settings, declared) == []
    assert await describe(settings, declared) == []

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        topic = settings.topic("alerts")
        # alter_configs replaces every dynamic setting of the topic: the declared ones stay, retention drifts
        (shape,) = [t for t in declared if t.name == topic]
        changed = {**shape.configs, "retention.ms": "1000"}
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, changed)])
    finally:
        await admin.close()
    for _ in range(50):  # the broker applies a config change through its metadata log, a moment later
        if drifts := await describe(settings, declared):
            break
        await asyncio.sleep(0.2)
    assert [(d.topic, d.setting, d.actual) for d in drifts] == [(topic, "retention.ms", "1000")]


async def test_status_lag_matches_the_groups_committed_offsets(settings: Settings) -> None:
    await create(settings, declared_topics(settings, []))
    topic = settings.topic("alerts")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(topic, b"v", key=b"k", partition=i % 2)
    finally:
        await producer.stop()
    # No auto-commit: stopping would otherwise commit the position it fetched (the end) over the offset set here.
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, group_id=settings.app_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "")})
    finally:
        await consumer.stop()

    report = await collect(settings)
    rows = {(r.topic, r.partition): r for r in report.partitions}
    assert (rows[(topic, 0)].committed, rows[(topic, 0)].end, rows[(topic, 0)].lag) == (3, 5, 2)
    assert (rows[(topic, 1)].committed, rows[(topic, 1)].lag) == (None, 5)
    assert report.sink_backlog >= 7
    assert (report.threads, report.stale_threads) == (0, 0)
