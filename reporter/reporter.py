"""The reporter: readings in, snapshots delivered at the cadence of spec 5.1; session events passed through.

`Reporter` is importable by workers that embed it: feed it readings (`observe`), set must-finish when the worker knows
it, and call `flush` whenever `next_due` comes. The `run_*` coroutines drive it from the three sources.

Give it a `SpooledDelivery` (as `ctxbudget report` does) and every snapshot it decides to send is stored on disk at once
and delivered in order whenever the receiver is up (`reporter.delivery.spool`); the engine's answered interval comes
back through `answered`. With a plain delivery, a failed delivery pauses reporting and only each thread's latest
reading stays due.

A compaction the tool announces before it reports usage again (`Reading.usage_stale`) is said at once as a
`compaction_completed` session event (count in its id, time, the usage of before as `tokens_before`), while no
snapshot goes out until the tool reports occupancy again. A tailer that collects session events (a Claude Code
transcript's, a Codex rollout's) derives its own compaction events, and its readings say so (`events_derived`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.profiles import DEFAULT_CODEX_VERSION, CodexProfile
from reporter.atomic_file import write_atomically
from reporter.cadence import Cadence, Outgoing
from reporter.codex.app_server import CodexAppServerParser
from reporter.delivery import Delivery, DeliveryError, RejectedRecord
from reporter.delivery.spooled import SpooledDelivery
from reporter.jsonl_tailer import JsonlTailer
from reporter.readings import Identity, Reading, SkipLog, compaction_events, reading_level, to_snapshot
from schemas import SESSION_EVENT_ADAPTER, SessionEvent, SourceKind, ThreadContextSnapshot
from schemas.codec import Codec, DecodeError
from schemas.copies import replaced

log = logging.getLogger(__name__)

_EVENT_CODEC: Codec[SessionEvent] = Codec(SESSION_EVENT_ADAPTER)
AnyTailer = JsonlTailer[Any]
"""Any tool's files' tailer (reporter/tools.py)."""
EVENTS_PER_REQUEST = 200
"""Session events sent in one request (a round of hundreds of busy threads reads a few hundred, each well under a
kilobyte: far below the API's body limit)."""
DELIVERY_PAUSE = timedelta(seconds=5)
"""After the delivery gave up (its own retries exhausted), wait this long before the next attempt."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _load_events(path: Path | None) -> list[SessionEvent]:
    if path is None or not path.exists():
        return []
    return [_EVENT_CODEC.decode(line) for line in path.read_bytes().splitlines() if line]


class Reporter:
    def __init__(
        self,
        identity: Identity,
        delivery: Delivery,
        profile: CodexProfile = DEFAULT_CODEX_VERSION,
        cadence: Cadence | None = None,
        clock: Callable[[], datetime] = _utc_now,
        pending_events: Path | None = None,
    ) -> None:
        """`pending_events`: where compaction events not delivered yet are kept across restarts (one JSON a line)."""
        self.identity = identity
        self.delivery = delivery
        self.profile = profile
        self.cadence = cadence or Cadence()
        self.clock = clock
        self.sent = 0
        self._must_finish: dict[str, bool] = {}
        self._paused_until = datetime.min.replace(tzinfo=UTC)
        self._announced: dict[tuple[str, SourceKind], int] = {}
        """Per thread and source, the compaction count last said as an event."""
        self._pending_events = pending_events
        self._events: list[SessionEvent] = _load_events(pending_events)
        """Compaction events not delivered yet, in order: kept (and saved) until the delivery takes them."""
        self.woken = asyncio.Event()
        """Set when what is due may have changed (a reading, an answered interval): the run loops wait on it."""
        if isinstance(delivery, SpooledDelivery):
            delivery.on_answer = self.answered

    def observe(self, reading: Reading) -> None:
        """Take a new reading of a thread; a significant change makes it due at once."""
        reading = replace(reading, must_finish=self._must_finish.get(reading.thread_id, False))
        try:
            to_snapshot(reading, self.identity, self.profile)
        except (ValidationError, ValueError) as error:
            log.warning("reporter: dropped a reading of %r that makes no valid snapshot: %s", reading.thread_id, error)
            return
        key = (reading.thread_id, reading.source_kind)
        if reading.usage_stale and not reading.events_derived and self._announced.get(key) != reading.compaction_count:
            log.info(
                "reporter: thread %r compacted (%d so far, last at %s); its occupancy is unknown until the tool reports"
                " usage again: the compaction is sent as an event, and no snapshot until then",
                reading.thread_id,
                reading.compaction_count,
                reading.last_compaction_at,
            )
            self._announced[key] = reading.compaction_count
            self._events.extend(compaction_events(reading, self.identity, self.profile))
            self._save_events()
        self.cadence.observe(reading, reading_level(reading, self.profile), self.clock())
        self.woken.set()

    def add_events(self, events: Sequence[SessionEvent]) -> None:
        """Session events a source derived (the app-server's compactions): sent, stamped with who reports them, before
        the next snapshots, and kept (saved) until delivered."""
        if events:
            self._events.extend(_stamped(event, self.identity) for event in events)
            self._save_events()
            self.woken.set()

    def set_must_finish(self, thread_id: str, value: bool) -> None:
        """Spec 4.2 as the worker knows it; a change is significant and goes out at once under a new version."""
        if self._must_finish.get(thread_id, False) == value:
            return
        self._must_finish[thread_id] = value
        for source in SourceKind:
            if (latest := self.cadence.latest(thread_id, source)) is not None:
                self.observe(latest)

    async def flush(self, final: bool = False) -> int:
        """Send what is due (with `final`, also every reading not sent yet); returns how many were delivered.

        Stops at the first delivery failure: what was not delivered stays due and goes out on a later flush.
        """
        now = self.clock()
        if now < self._paused_until and not final:
            return 0
        # Snapshots go out (or into the spool) even when events cannot: separate topics with no order between them,
        # and a snapshot held back by an event would be lost at exit.
        await self._send_events(final)
        outgoing = self.cadence.unsent(now) if final else self.cadence.due(now)
        if isinstance(self.delivery, SpooledDelivery):  # one fsynced append for the round, not one per snapshot
            self.delivery.spool_snapshots([self._snapshot(item) for item in outgoing])
            spooled_at = self.clock()
            for item in outgoing:
                self.cadence.sent(item, spooled_at, None)
            self.sent += len(outgoing)
            return len(outgoing)
        delivered = 0
        for item in outgoing:
            try:
                interval = await self.delivery.send_snapshot(self._snapshot(item))
            except DeliveryError as error:
                log.warning("reporter: delivery failed, retrying in %.0f s: %s", DELIVERY_PAUSE.total_seconds(), error)
                self._paused_until = self.clock() + DELIVERY_PAUSE
                break
            except RejectedRecord as error:
                log.error("reporter: the receiver rejected a snapshot of thread %r: %s", item.reading.thread_id, error)
                interval = None  # counted as sent: the same record would be rejected again
            self.cadence.sent(item, self.clock(), interval)
            delivered += 1
        self.sent += delivered
        return delivered

    async def _send_events(self, final: bool) -> None:
        """Send the pending events in order; on failure keep the rest (saved for the next run) and pause."""
        while self._events:
            try:
                await self.delivery.send_event(self._events[0])
            except DeliveryError as error:
                log.warning(
                    "reporter: event delivery failed, retrying in %.0f s: %s", DELIVERY_PAUSE.total_seconds(), error
                )
                self._paused_until = self.clock() + DELIVERY_PAUSE
                if final:
                    log.warning(
                        "reporter: %d session events not delivered at exit, kept in %s for the next run",
                        len(self._events),
                        self._pending_events,
                    )
                return
            except RejectedRecord as error:
                if isinstance(self.delivery, SpooledDelivery):
                    self.delivery.set_aside("session_event", self._events[0], str(error))
                else:
                    log.error("reporter: the receiver rejected a session event: %s", error)
            self._events.pop(0)
            self._save_events()

    @property
    def events_left(self) -> int:
        """Compaction events not delivered yet (saved for the next run when `pending_events` is set)."""
        return len(self._events)

    def _save_events(self) -> None:
        if self._pending_events is not None:
            write_atomically(self._pending_events, b"".join(_EVENT_CODEC.encode(e) + b"\n" for e in self._events))

    def answered(self, snapshot: ThreadContextSnapshot, next_required_seconds: int | None) -> None:
        """A spooled snapshot was delivered: the engine's interval, when it gave one, sets the thread's cadence."""
        if next_required_seconds is not None:
            key = (snapshot.thread_id, snapshot.source_kind)
            self.cadence.answered(key, snapshot.snapshot_version, next_required_seconds)
            self.woken.set()  # a shorter interval applies now, not after the sleep computed under the old one

    def _snapshot(self, item: Outgoing) -> ThreadContextSnapshot:
        return to_snapshot(item.reading, self.identity, self.profile, item.resend, item.captured_at)

    def seconds_until_due(self) -> float | None:
        due = self.cadence.next_due()
        if due is None:
            return None
        return max((max(due, self._paused_until) - self.clock()).total_seconds(), 0.0)


async def run_app_server(
    reporter: Reporter, lines: AsyncIterator[str], parser: CodexAppServerParser | None = None
) -> None:
    """Report from app-server notification lines until they end.

    Lines are parsed as they come, whatever the delivery is doing (a slow or unavailable API never holds up the stream
    being read); the cadence keeps only each thread's latest reading, so memory stays bounded by the threads.
    """
    parser = parser or CodexAppServerParser()

    async def read() -> None:
        async for line in lines:
            reading = parser.feed(line, reporter.clock())
            reporter.add_events(parser.take_events())  # a compaction's start goes out before the reading after it
            if reading is not None:
                reporter.observe(reading)

    reader = asyncio.create_task(read())
    try:
        while not reader.done():
            reporter.woken.clear()
            await reporter.flush()
            waiter = asyncio.create_task(reporter.woken.wait())
            timeout = reporter.seconds_until_due()
            await asyncio.wait({reader, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        await reader  # raises what the reader raised
        await reporter.flush(final=True)
    finally:
        reader.cancel()


async def run_rollouts(reporter: Reporter, tailers: AnyTailer | Sequence[AnyTailer], poll_seconds: float = 1.0) -> None:
    """Tail rollout files and transcripts forever (one tailer, or several: Claude Code's and Codex's in one process):
    poll, report, save positions (safe at once: each thread's latest reading is saved with them and offered again on
    restart)."""
    tailers = [tailers] if isinstance(tailers, JsonlTailer) else list(tailers)
    for tailer in tailers:
        for reading in tailer.restored():
            reporter.observe(reading)
    delivered = [True] * len(tailers)  # per tailer: what its lines derived so far was delivered (it may be saved)
    try:
        while True:
            reporter.woken.clear()  # before the flush: an answer that arrives during it still wakes the wait below
            delivered = [False] * len(tailers)
            for tailer in tailers:
                for reading in tailer.poll():
                    reporter.observe(reading)
                _work_facts(reporter, tailer)
            delivered = await _send_events(reporter.delivery, tailers, reporter.identity)
            await reporter.flush()
            for tailer, done in zip(tailers, delivered, strict=True):
                if done:  # else a restart re-reads the lines and derives the same events again
                    tailer.commit()
            due = reporter.seconds_until_due()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll_seconds if due is None else min(poll_seconds, due)):
                    await reporter.woken.wait()
    finally:  # stopped: save what a save held back, unless its events are still owed
        for tailer, done in zip(tailers, delivered, strict=True):
            if done:
                tailer.commit(final=True)


def _work_facts(reporter: Reporter, tailer: AnyTailer) -> None:
    """Spec 4.2 facts of the threads that moved: changes go out as events and set must-finish. A thread looked at
    too recently waits for a later round (its lines are read; only git is asked less often)."""
    if tailer.facts is None:
        return
    now = reporter.clock()
    for thread_id in sorted(tailer.take_touched()):
        if not tailer.facts.due(thread_id, now):
            tailer.touched.add(thread_id)
            continue
        changes = tailer.facts.evaluate(thread_id, now, reporter.identity.project_id)
        if tailer.collect_events:
            tailer.queue_events(changes)
        reporter.set_must_finish(thread_id, tailer.facts.must_finish(thread_id))


async def _send_events(delivery: Delivery, tailers: Sequence[AnyTailer], identity: Identity) -> list[bool]:
    """The round's session events of every tailer together (one request for both tools' files, not one per tool);
    what was not delivered goes back to its tailer, first in line for the next round. Per tailer: whether all of its
    events were delivered."""
    taken = [tailer.take_events() for tailer in tailers]
    delivered = await _deliver_events(delivery, [event for events in taken for event in events], identity)
    done = []
    for tailer, events in zip(tailers, taken, strict=True):
        tailer.return_events(events[delivered:])
        done.append(delivered >= len(events))
        delivered = max(delivered - len(events), 0)
    return done


async def _deliver_events(delivery: Delivery, events: list[SessionEvent], identity: Identity) -> int:
    """Send the events stamped with who reports them (the API admits an event only for a project, and the projection
    publishes a reading only for a thread whose node and worker it knows), a batch per request, in order; one the
    receiver refused is set aside with the reason (a refused batch is sent again one by one, to find it). Returns
    how many, from the first, were delivered or set aside."""
    for start in range(0, len(events), EVENTS_PER_REQUEST):
        batch = [_stamped(event, identity) for event in events[start : start + EVENTS_PER_REQUEST]]
        try:
            await delivery.send_events(batch)
            continue
        except DeliveryError as error:
            log.warning("reporter: session events not delivered, retrying: %s", error)
            return start
        except RejectedRecord:
            left = await _send_each(delivery, batch)
        if left is not None:
            return start + left
    return len(events)


async def _send_each(delivery: Delivery, events: list[SessionEvent]) -> int | None:
    """Send one by one, setting aside what the receiver refuses; the index of the first not delivered, if any."""
    for index, event in enumerate(events):
        try:
            await delivery.send_event(event)
        except DeliveryError as error:
            log.warning("reporter: session events not delivered, retrying: %s", error)
            return index
        except RejectedRecord as error:
            if isinstance(delivery, SpooledDelivery):
                delivery.set_aside("session_event", event, str(error))
            else:
                log.error("reporter: the receiver rejected a session event: %s", error)
    return None


def _stamped(event: SessionEvent, identity: Identity) -> SessionEvent:
    known = {"project_id": identity.project_id, "node_id": identity.node_id, "worker_id": identity.worker_id}
    missing = {name: value for name, value in known.items() if getattr(event, name) is None}
    return replaced(event, missing) if missing else event


async def run_events(delivery: Delivery, lines: AsyncIterator[str]) -> SkipLog:
    """Validate and pass through our own session events, one JSON object per line; invalid lines are skipped."""
    skipped = SkipLog("session events")
    async for line in lines:
        if not line.strip():
            continue
        try:
            event = _EVENT_CODEC.decode(line.encode())
        except DecodeError as error:
            skipped.skip(error.reason, error.detail)
            continue
        await delivery.send_event(event)
    return skipped
