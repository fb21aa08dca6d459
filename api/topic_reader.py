"""A group-less reader of every partition of one topic: the API's readers keep no committed offsets of their own.

Each position is chosen by the reader (the topic's start for a table it rebuilds, its end for live events, or the
positions a client resumes from), so a consumer group would only add rebalances.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

log = logging.getLogger(__name__)


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


class TopicTable:
    """A table the API keeps from a whole topic (its newest record per key): read to the end, then followed."""

    def apply(self, key: bytes | None, value: bytes | None) -> bool:
        """Take one record; False when it is invalid (the engine dead-letters it) and changed nothing."""
        raise NotImplementedError

    async def catch_up(self, consumer: AIOKafkaConsumer) -> None:
        """Read up to the topic's end as of now, so the first answers use the current table."""
        ends = await end_offsets(consumer)
        while any(position < ends[p] for p, position in (await current_positions(consumer)).items()):
            await self._read(consumer, timeout_ms=500)

    async def follow(self, consumer: AIOKafkaConsumer) -> None:
        """Apply new records as they come, until cancelled."""
        while True:
            await self._read(consumer, timeout_ms=1_000)

    async def _read(self, consumer: AIOKafkaConsumer, timeout_ms: int) -> None:
        batches = await consumer.getmany(timeout_ms=timeout_ms)
        for records in batches.values():
            for record in records:
                if not self.apply(record.key, record.value):
                    log.debug("ignored invalid record at %s:%s:%s", record.topic, record.partition, record.offset)
