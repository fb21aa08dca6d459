"""Where the reporter delivers: the contract every delivery keeps (the 5.2 HTTP endpoint, or Kafka directly)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from schemas import SessionEvent, ThreadContextSnapshot


class DeliveryError(RuntimeError):
    """The receiver stayed unavailable through every retry; the record was not delivered and may be sent again."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the receiver asked to wait (HTTP `Retry-After`), when it said."""


@dataclass(frozen=True)
class RetryDelays:
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The receiver's `Retry-After` when it gave one, else exponential backoff; never beyond the cap."""
        wanted = retry_after if retry_after is not None else self.base_delay_seconds * 2**attempt
        return min(max(wanted, 0.0), self.max_delay_seconds)


class RejectedRecord(RuntimeError):
    """The receiver refused the record itself (a client error): sending it again cannot succeed."""


class RefusedRecord(RejectedRecord):
    """The receiver refuses this record for its thread (HTTP 403: another project's thread, one this token may not
    report): set aside like an invalid one, so one refused thread never holds back the others' records."""


class Delivery(Protocol):
    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        """Deliver one snapshot; return the engine's `next_required_report_in_seconds` when the receiver answers."""
        ...

    async def send_event(self, event: SessionEvent) -> None: ...

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        """Deliver several events in order, all or none: a `RejectedRecord` says one of them is invalid (send them
        one by one to find it), a `DeliveryError` that none is known to have arrived."""
        ...

    async def close(self) -> None: ...
