"""Delivery for a receiver that may be down for a while: snapshots go to the on-disk spool at once, and one task
delivers the spool in order, with backoff, removing each record only after the receiver confirmed it.

Whatever the receiver does, `send_snapshot` costs one fsynced append, so the reader of a source never waits for the
API or Kafka. A record the receiver rejects (invalid, or refused for its thread: 403) leaves the spool only after it
was appended (fsynced) to the dead-letter file beside it, `rejected.jsonl`: one JSON object a line with the reason and
the snapshot, never lost, and the records behind it go on. The first record set aside of a thread is logged; the
thread's later ones only counted (a refused thread reports every few seconds: one line each would flood the log).
Session events are not versioned (a resend is no harmless duplicate to the projection), so they go straight to the
inner delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel

from reporter.delivery import Delivery, DeliveryError, RejectedRecord, RetryDelays
from reporter.delivery.spool import Spool
from schemas import SessionEvent, ThreadContextSnapshot

log = logging.getLogger(__name__)

REJECTED_NAME = "rejected.jsonl"
OUTAGE_DELAYS = RetryDelays(base_delay_seconds=1.0, max_delay_seconds=60.0)
DEFAULT_DRAIN_SECONDS = 10.0
"""How long `close` waits for the spool to empty; what is left is delivered by the next run."""

Answered = Callable[[ThreadContextSnapshot, int | None], None]
"""Told of each delivered snapshot and the receiver's `next_required_report_in_seconds` (spec 5.2)."""


class SpooledDelivery:
    def __init__(
        self,
        spool: Spool,
        delivery: Delivery,
        delays: RetryDelays = OUTAGE_DELAYS,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.spool = spool
        self.delivery = delivery
        self.delays = delays
        self.drain_seconds = drain_seconds
        self.on_answer: Answered | None = None
        self.delivered = 0
        self.rejected = 0
        self.rejected_path = spool.directory / REJECTED_NAME
        self._sleep = sleep
        self._appended = asyncio.Event()
        self._drained = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._logged: set[tuple[str, str]] = set()
        """(kind, thread) whose rejection was logged."""

    async def start(self) -> None:
        """Start delivering, beginning with whatever an earlier run left in the spool."""
        self._task = asyncio.create_task(self._deliver(), name="reporter-spool")

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        """Stored durably; delivered later. No answer yet, so the cadence uses spec 5.1 until `on_answer` says."""
        self.spool_snapshots([snapshot])
        return None

    def spool_snapshots(self, snapshots: Sequence[ThreadContextSnapshot]) -> None:
        """Several snapshots stored durably in one append (one fsync); delivered later, in order."""
        if not snapshots:
            return
        self.spool.append(snapshots)
        self._drained.clear()
        self._appended.set()

    async def send_event(self, event: SessionEvent) -> None:
        await self.delivery.send_event(event)

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        await self.delivery.send_events(events)

    async def drained(self) -> None:
        """Returns once every spooled snapshot was delivered (or rejected and set aside)."""
        await self._drained.wait()

    async def close(self) -> None:
        """Give delivery `drain_seconds` to empty the spool, then stop; the rest stays on disk for the next run."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.drain_seconds):
                    await self._drained.wait()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if len(self.spool):
                log.warning("spool: %d snapshots left for the next run", len(self.spool))
        self.spool.close()
        await self.delivery.close()

    async def _deliver(self) -> None:
        failures = 0
        while True:
            record = self.spool.head()
            if record is None:
                self._drained.set()
                self._appended.clear()
                await self._appended.wait()
                continue
            try:
                interval = await self.delivery.send_snapshot(record.snapshot)
            except DeliveryError as error:
                delay = self.delays.delay(failures, error.retry_after)
                failures += 1
                pending = len(self.spool)
                log.warning("spool: delivery failed (%d pending), next try in %.1f s: %s", pending, delay, error)
                await self._sleep(delay)
                continue
            except RejectedRecord as error:
                self._set_aside(record.snapshot, str(error))
                self.spool.remove(record.seq)
                failures = 0
                continue
            except Exception:  # a bug must not end this task silently while the reporter keeps spooling
                delay = self.delays.delay(failures, None)
                failures += 1
                log.exception("spool: delivering a snapshot failed unexpectedly, next try in %.1f s", delay)
                await self._sleep(delay)
                continue
            failures = 0
            self.spool.remove(record.seq)
            self.delivered += 1
            if self.on_answer is not None:
                self.on_answer(record.snapshot, interval)

    def _set_aside(self, snapshot: ThreadContextSnapshot, reason: str) -> None:
        self.set_aside("snapshot", snapshot, reason)

    def set_aside(self, kind: str, record: BaseModel, reason: str) -> None:
        """The same record would be rejected again: keep it, with the reason, where an operator can look at it."""
        line = json.dumps({"reason": reason, kind: record.model_dump(mode="json")}, ensure_ascii=False)
        with self.rejected_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.rejected += 1
        thread_id = str(getattr(record, "thread_id", ""))
        if (kind, thread_id) in self._logged:
            log.debug("spool: a %s of thread %r set aside: %s", kind, thread_id, reason)
            return
        self._logged.add((kind, thread_id))
        log.error(
            "spool: the receiver rejected a %s of thread %r (set aside in %s; its later ones are only counted): %s",
            kind,
            thread_id,
            self.rejected_path,
            reason,
        )
