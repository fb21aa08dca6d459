"""The Kafka records of the pipeline's inputs (topic, key, value), built one way by every producer: the reporter's
direct delivery and the API's write endpoints."""

from __future__ import annotations

from dataclasses import dataclass

from core.topics import HANDOFF_PACKAGES, MASTER_ACTION_COMMANDS, SESSION_EVENTS, SNAPSHOTS
from schemas import HandoffPackage, MasterActionCommand, SessionEvent, ThreadContextSnapshot
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
