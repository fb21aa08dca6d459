"""Delivery straight to the pipeline's input topics for workers that reach Kafka: idempotent, acks from all replicas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from core.topics import HANDOFF_PACKAGES, MASTER_ACTION_COMMANDS, SESSION_EVENTS, SNAPSHOTS
from reporter.delivery import DeliveryError
from schemas import HandoffPackage, MasterActionCommand, MasterActionCommandKind, SessionEvent, ThreadContextSnapshot
from schemas.codec import encode_record


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    key: bytes
    value: bytes


def snapshot_record(snapshot: ThreadContextSnapshot, topic_prefix: str) -> KafkaRecord:
    """Keyed by thread, like every input of the engine, so one thread's records stay in order on one partition."""
    return KafkaRecord(f"{topic_prefix}{SNAPSHOTS}", snapshot.thread_id.encode(), encode_record(snapshot))


def event_record(event: SessionEvent, topic_prefix: str) -> KafkaRecord:
    return KafkaRecord(f"{topic_prefix}{SESSION_EVENTS}", event.thread_id.encode(), encode_record(event))


def package_record(package: HandoffPackage, topic_prefix: str) -> KafkaRecord:
    return KafkaRecord(f"{topic_prefix}{HANDOFF_PACKAGES}", package.from_thread_id.encode(), encode_record(package))


def command_record(command: MasterActionCommand, topic_prefix: str) -> KafkaRecord:
    """Keyed by the action's thread: the partition that owns the thread's state, as the API publishes it."""
    return KafkaRecord(f"{topic_prefix}{MASTER_ACTION_COMMANDS}", command.thread_id.encode(), encode_record(command))


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
