"""Where the reporter delivers: the contract every sink keeps (the 5.2 HTTP endpoint, or Kafka directly)."""

from __future__ import annotations

from typing import Protocol

from schemas import SessionEvent, ThreadContextSnapshot


class DeliveryError(RuntimeError):
    """The receiver stayed unavailable through every retry; the record was not delivered and may be sent again."""


class RejectedRecord(RuntimeError):
    """The receiver refused the record itself (a client error): sending it again cannot succeed."""


class Sink(Protocol):
    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        """Deliver one snapshot; return the engine's `next_required_report_in_seconds` when the sink gets an answer."""
        ...

    async def send_event(self, event: SessionEvent) -> None: ...

    async def close(self) -> None: ...
