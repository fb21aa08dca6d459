"""Delivery through the worker report API (spec 5.2): `POST /api/v1/workers/{worker_id}/thread-context`, and session
events to `POST /api/v1/workers/{worker_id}/session-events` (ours; the same delivery rules).

The body is exactly the 5.2 request. The snapshot's identity travels in headers (`Idempotency-Key`: snapshot_id,
`X-Snapshot-Version`), since the 5.2 body has no field for them and the API must not invent a version of its own.
Transient failures (unreachable, 429, 502, 503, 504) are retried with exponential backoff, honouring `Retry-After`.
Only a report the receiver finds invalid (400, 413, 422) or refuses for its thread (403: another project's thread, a
project or worker this token may not report; `RefusedRecord`) is rejected for good, and set aside by the caller: a
403 is about the record's thread, and holding it would hold every other thread's records behind it. Any other refusal
(a bad or expired token 401, a wrong URL 404, a broken server 500, a 2xx whose body is no 5.2 answer) is the
operator's to fix and concerns every record alike, so the record is kept (`DeliveryError`) and the spool sends it
again once the fix is in.
Plain `http.client` in a thread, no dependency: connections are kept open and reused (a worker with hundreds of
threads sends a session event every few lines, and a new connection per request cost more than the rest of the
reporter), one per concurrent sender (the spool's delivery and the events), and a kept one the server closed is
replaced once.
"""

from __future__ import annotations

import asyncio
import http.client
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from email.utils import parsedate_to_datetime

from pydantic import ValidationError

from reporter.delivery import DeliveryError, RefusedRecord, RejectedRecord, RetryDelays
from schemas import (
    HandoffPackage,
    MasterActionCommandKind,
    MasterActionRecord,
    SessionEvent,
    ThreadContextSnapshot,
    WorkerReportRequest,
    WorkerReportResponse,
)
from schemas.base import Record
from schemas.codec import encode_record

REPORT_PATH = "/api/v1/workers/{worker_id}/thread-context"  # spec 5.2
EVENTS_PATH = "/api/v1/workers/{worker_id}/session-events"  # ours: 5.2 has none (api/routes/session_events.py)
PACKAGES_PATH = "/api/v1/threads/{thread_id}/handoff-packages"
ACTIONS_PATH = "/api/v1/master-actions"
ACTION_COMMAND_PATH = "/api/v1/master-actions/{action_id}/{command}"
TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
INVALID_STATUS = frozenset({400, 413, 422})
"""The receiver refused the record itself: sending it again cannot succeed."""
REFUSED_STATUS = 403
_SNAPSHOT_IDENTITY = frozenset({"snapshot_id", "snapshot_version"})


@dataclass(frozen=True)
class RetryPolicy(RetryDelays):
    """Quick retries of one request (a blip); a longer outage is the spool's to wait out."""

    attempts: int = 6


def retry_after_seconds(headers: Message, now: datetime) -> float | None:
    """`Retry-After` as seconds: either delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return (parsedate_to_datetime(value) - now).total_seconds()
    except (TypeError, ValueError):
        return None


def report_body(snapshot: ThreadContextSnapshot) -> bytes:
    fields = {name: getattr(snapshot, name) for name in WorkerReportRequest.model_fields}
    return encode_record(WorkerReportRequest(**fields))


class _ActionPage(Record):
    items: list[MasterActionRecord]


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Message
    body: bytes


class HttpDelivery:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout_seconds: float = 10.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.retry = retry
        self.timeout_seconds = timeout_seconds
        self._sleep = sleep
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.on_response: Callable[[WorkerReportResponse], None] | None = None
        """Told of every 5.2 answer: the relay takes the thread's open master actions from it."""

    def _connection(self, parts: urllib.parse.SplitResult) -> tuple[http.client.HTTPConnection, bool]:
        """An idle kept connection (True: reused), or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return kind(parts.netloc, timeout=self.timeout_seconds), False

    def _request(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> _Answer:
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        while True:
            connection, reused = self._connection(parts)
            try:
                connection.request(method, target, body=body, headers=headers)
                response = connection.getresponse()
                answer = _Answer(response.status, response.headers, response.read())
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                if reused and isinstance(
                    error, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError
                ):
                    continue  # the server closed the kept connection meanwhile: the request never reached it
                raise OSError(f"{url}: {error!r}") from error
            if response.will_close:
                connection.close()
            else:
                with self._lock:
                    self._idle.append(connection)
            return answer

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        url = self.base_url + REPORT_PATH.format(worker_id=urllib.parse.quote(snapshot.worker_id, safe=""))
        identity = {"Idempotency-Key": snapshot.snapshot_id, "X-Snapshot-Version": str(snapshot.snapshot_version)}
        answer = await self._deliver(url, report_body(snapshot), identity)
        try:
            response = WorkerReportResponse.model_validate_json(answer.body)
        except ValidationError as error:  # not the API (a proxy's page?) or a broken one: keep the record
            reason = f"{url}: {answer.status} is no 5.2 answer (kept, to send once fixed): {error}"
            raise DeliveryError(reason) from error
        if self.on_response is not None:
            self.on_response(response)
        return response.next_required_report_in_seconds

    async def send_event(self, event: SessionEvent) -> None:
        if event.worker_id is None:  # the route is per worker; an event that names none cannot be placed
            raise RejectedRecord(f"session event {event.event_id!r} names no worker_id: the API route needs one")
        url = self.base_url + EVENTS_PATH.format(worker_id=urllib.parse.quote(event.worker_id, safe=""))
        await self._deliver(url, encode_record(event), {})

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        """One request for all of them (a JSON array: the route refuses the whole body when one is invalid)."""
        workers = {event.worker_id for event in events}
        if len(workers) != 1 or None in workers:
            raise RejectedRecord("a batch of session events must name one worker_id: send them one by one")
        url = self.base_url + EVENTS_PATH.format(worker_id=urllib.parse.quote(str(events[0].worker_id), safe=""))
        await self._deliver(url, b"[" + b",".join(encode_record(event) for event in events) + b"]", {})

    async def send_package(self, package: HandoffPackage) -> None:
        """A version of the thread's package; 409 (the engine would drop it) is a rejection like an invalid body."""
        url = self.base_url + PACKAGES_PATH.format(thread_id=urllib.parse.quote(package.from_thread_id, safe=""))
        await self._deliver(url, encode_record(package), {}, invalid=INVALID_STATUS | {409})

    async def send_action_command(self, action_id: str, thread_id: str, command: MasterActionCommandKind) -> None:
        """Acknowledge or complete an action. 409 (already finished) is success: nothing is left to say. A 404 is
        kept and sent again: the action may not have reached the API's store yet."""
        del thread_id  # the API finds the thread itself
        action = urllib.parse.quote(action_id, safe="")
        url = self.base_url + ACTION_COMMAND_PATH.format(action_id=action, command=command.value)
        await self._deliver(url, b"", {}, finished=frozenset({409}))

    async def open_actions(self) -> list[MasterActionRecord]:
        """The open actions of the threads this worker's token reports (for a worker that reports to Kafka)."""
        answer = await self._deliver(self.base_url + ACTIONS_PATH + "?open=true", None, {}, method="GET")
        return _ActionPage.model_validate_json(answer.body).items

    async def _deliver(
        self,
        url: str,
        body: bytes | None,
        extra_headers: dict[str, str],
        *,
        method: str = "POST",
        invalid: frozenset[int] = INVALID_STATUS,
        finished: frozenset[int] = frozenset(),
    ) -> _Answer:
        """The 2xx answer (or one of `finished`); retries what is transient, raises what is not (see the module's
        docstring); `invalid` are the statuses that reject the record for good."""
        headers = {"Content-Type": "application/json", **extra_headers}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last_failure, retry_after = "", None
        for attempt in range(self.retry.attempts):
            try:
                answer = await asyncio.to_thread(self._request, method, url, body, headers)
            except OSError as error:  # refused, reset, timed out, name not resolved
                last_failure, retry_after = repr(error), None
            else:
                if 200 <= answer.status < 300 or answer.status in finished:
                    return answer
                if answer.status in invalid:
                    raise RejectedRecord(f"{url}: {answer.status} {answer.body[:500]!r}")
                if answer.status == REFUSED_STATUS and method == "POST":
                    raise RefusedRecord(f"{url}: {answer.status} {answer.body[:500]!r}")
                if answer.status not in TRANSIENT_STATUS:
                    raise DeliveryError(f"{url}: {answer.status} {answer.body[:500]!r} (kept, to send once fixed)")
                last_failure = f"{answer.status} {answer.body[:200]!r}"
                retry_after = retry_after_seconds(answer.headers, datetime.now(UTC))
            if attempt + 1 < self.retry.attempts:
                await self._sleep(self.retry.delay(attempt, retry_after))
        raise DeliveryError(f"{url}: gave up after {self.retry.attempts} attempts; last: {last_failure}", retry_after)

    async def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
