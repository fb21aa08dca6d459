"""Client events as the SSE reader receives them: records of `client-events` at given positions."""

from __future__ import annotations

from datetime import UTC, datetime

from aiokafka.structs import ConsumerRecord

from schemas import ThreadHandoffRequired
from schemas.codec import encode_record

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)


def client_event(project_id: str, partition: int, offset: int, thread_id: str = "thread-1") -> ConsumerRecord:
    event = ThreadHandoffRequired(
        event_id=f"ev-{partition}-{offset}",
        occurred_at=T0,
        project_id=project_id,
        thread_id=thread_id,
        context_budget_level="critical",
    )
    return raw_record(partition, offset, encode_record(event), project_id.encode())


def raw_record(partition: int, offset: int, value: bytes | None, key: bytes | None = None) -> ConsumerRecord:
    return ConsumerRecord(
        "ctx.client-events", partition, offset, 0, 0, key, value, None, len(key or b""), len(value or b""), ()
    )
