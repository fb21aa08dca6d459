"""Delivery straight to the pipeline's input topics for workers that reach Kafka: idempotent, acks from all replicas."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from core.records import KafkaRecord, command_record, event_record, package_record, snapshot_record
from reporter.delivery import DeliveryError
from schemas import HandoffPackage, MasterActionCommand, MasterActionCommandKind, SessionEvent, ThreadContextSnapshot


class KafkaDelivery:
    """Sends each record and waits for its acknowledgement; the engine answers no interval, so spec 5.1's apply."""

    def __init__(self, bootstrap_servers: str, topic_prefix: str, worker_id: str = "reporter") -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic_prefix = topic_prefix
        self.worker_id = worker_id
        """Who acknowledges or completes an action, as the engine records it."""
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        # aiokafka binds its producer to the running loop: it can only be built once one runs (`asyncio.run`).
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap_servers, enable_idempotence=True, acks="all")
        await self._producer.start()

    async def _send(self, record: KafkaRecord) -> None:
        if self._producer is None:
            raise RuntimeError("KafkaDelivery.start() was not awaited")
        try:
            await self._producer.send_and_wait(record.topic, record.value, key=record.key)
        except KafkaError as error:  # the producer's own retries are spent: the spool waits and sends again
            raise DeliveryError(f"{record.topic}: {error!r}") from error

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        await self._send(snapshot_record(snapshot, self.topic_prefix))
        return None

    async def send_event(self, event: SessionEvent) -> None:
        await self._send(event_record(event, self.topic_prefix))

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        """In order; a repeat of the ones already sent after a failure carries the same event ids."""
        for event in events:
            await self.send_event(event)

    async def send_package(self, package: HandoffPackage) -> None:
        await self._send(package_record(package, self.topic_prefix))

    async def send_action_command(self, action_id: str, thread_id: str, command: MasterActionCommandKind) -> None:
        """Straight to the engine, which moves an action only forward (a repeat changes nothing)."""
        now = datetime.now(UTC)
        issued = MasterActionCommand(
            action_id=action_id, thread_id=thread_id, command=command, issued_by=self.worker_id, issued_at=now
        )
        await self._send(command_record(issued, self.topic_prefix))

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
