"""A group-less reader of every partition of one topic: the API's readers keep no committed offsets of their own.

Each position is chosen by the reader (the topic's start for a table it rebuilds, its end for live events, or the
positions a client resumes from), so a consumer group would only add rebalances.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient


async def topic_partitions(bootstrap_servers: str, topic: str) -> list[int]:
    """The topic's partition ids, from the cluster's metadata (LookupError when the topic does not exist)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if described["error_code"] or not described["partitions"]:
        raise LookupError(f"topic {topic} does not exist (error code {described['error_code']})")
    return sorted(p["partition"] for p in described["partitions"])


async def open_reader(
    bootstrap_servers: str,
    topic: str,
    partitions: Collection[int],
    *,
    from_start: bool,
    positions: Mapping[int, int] | None = None,
) -> AIOKafkaConsumer:
    """A started consumer assigned `partitions` of `topic`, at their start or end, except where `positions` say."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",  # a position below the log start (expired records) resumes at the start
        group_id=None,
    )
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        if from_start:
            await consumer.seek_to_beginning(*assigned)
        else:
            await consumer.seek_to_end(*assigned)
        for tp in assigned:
            if positions and tp.partition in positions:
                consumer.seek(tp, positions[tp.partition])
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def current_positions(consumer: AIOKafkaConsumer) -> dict[int, int]:
    """The next offset the consumer reads on each of its partitions."""
    return {tp.partition: await consumer.position(tp) for tp in consumer.assignment()}


async def end_offsets(consumer: AIOKafkaConsumer) -> dict[int, int]:
    ends = await consumer.end_offsets(list(consumer.assignment()))
    return {tp.partition: offset for tp, offset in ends.items()}
