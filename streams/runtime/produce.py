"""Sending a batch's records to Kafka as one aiokafka batch per partition, acknowledged before it returns.

Per record, aiokafka's `send` looks up the topic's metadata twice and makes a future whose completion is one more
event-loop callback. For a fold that publishes many small batches of many keys (an aggregates worker fed live), that
was a third of its samples.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2
from aiokafka.producer.message_accumulator import BatchBuilder

Record = tuple[str, bytes, bytes]
"""Topic, key, value."""


@functools.lru_cache(maxsize=1 << 16)
def partition_of(key: bytes, partitions: int) -> int:
    """aiokafka's default partitioner (and so Faust's and the Java client's) for a key, over `partitions`. Cached: the
    same thread, project and conversation keys come back on every batch, and murmur2 is pure Python."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


async def produce(kafka: AIOKafkaProducer, records: Iterable[Record], partition_counts: dict[str, int]) -> None:
    """Send `records` to the partitions their keys hash to, in order within each partition, and wait until Kafka has
    acknowledged every one. `partition_counts` caches each topic's partition count (fixed for keyed topics: more
    partitions would move keys)."""
    open_batches: dict[tuple[str, int], BatchBuilder] = {}
    delivered = []
    for topic, key, value in records:
        count = partition_counts.get(topic)
        if count is None:
            count = partition_counts[topic] = len(await kafka.client._wait_on_metadata(topic))
        partition = partition_of(key, count)
        batch = open_batches.get((topic, partition))
        if batch is None or batch.append(key=key, value=value, timestamp=None) is None:
            if batch is not None:  # full: send it and start the next
                delivered.append(await kafka.send_batch(batch, topic, partition=partition))
            batch = open_batches[(topic, partition)] = kafka.create_batch()
            batch.append(key=key, value=value, timestamp=None)  # a first record always fits
    for (topic, partition), batch in open_batches.items():
        delivered.append(await kafka.send_batch(batch, topic, partition=partition))
    await asyncio.gather(*delivered)
