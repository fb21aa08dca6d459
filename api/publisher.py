"""Writes to the engine's input topics: idempotent producer, acknowledged by all in-sync replicas, or an error.

A route answers success only after `publish` returned, so an accepted record is durably in Kafka; when Kafka cannot
take it in time the route answers 503 with Retry-After and the caller sends it again (the record's own id makes the
repeat harmless downstream).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

RETRY_AFTER_SECONDS = 5
"""What a 503 asks the caller to wait: about one report interval of an urgent thread (spec 5.1)."""
STOP_FLUSH_SECONDS = 3.0
"""How long a stop waits for records still unacknowledged. Each was answered 503 (or its request is gone), so its
caller sends it again; waiting longer only keeps a Ctrl-C from stopping the API while the broker is away."""

BATCH_BYTES = 256 * 1024
"""The records one partition's batch may hold. aiokafka keeps one produce request in flight per broker, so a batch
that fills (its default 16 KiB: about a dozen reports) makes every later report wait a whole round trip more; this
holds the reports of hundreds of concurrent requests, well under the topics' `max.message.bytes`."""


class KafkaUnavailable(RuntimeError):
    """Kafka did not acknowledge the record: it may or may not be written, so the caller must retry."""


class Publisher(Protocol):
    async def publish(self, topic: str, key: bytes, value: bytes) -> None: ...


class KafkaPublisher:
    def __init__(self, bootstrap_servers: str, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            enable_idempotence=True,
            acks="all",
            linger_ms=2,  # a few ms of batching lets concurrent requests share one produce round trip
            max_batch_size=BATCH_BYTES,
            request_timeout_ms=int(timeout_seconds * 1000),
        )

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        try:
            async with asyncio.timeout(STOP_FLUSH_SECONDS):
                await self._producer.flush()
        except TimeoutError:
            # aiokafka's stop flushes without a bound; failing what is left (no public call does) lets it close.
            self._producer._message_accumulator.fail_all(KafkaUnavailable("the API stopped before Kafka acknowledged"))
        await self._producer.stop()

    async def publish(self, topic: str, key: bytes, value: bytes) -> None:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                await self._producer.send_and_wait(topic, value, key=key)
        except (KafkaError, TimeoutError) as error:
            raise KafkaUnavailable(f"{topic}: {error!r}") from error
