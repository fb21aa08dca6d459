from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from core.records import event_record, snapshot_record
from reporter.delivery import DeliveryError, RefusedRecord, RejectedRecord
from reporter.delivery.http import HttpDelivery, RetryPolicy
from schemas import SESSION_EVENT_ADAPTER, ThreadContextSnapshot, WorkerReportRequest
from tests.samples import SNAPSHOT, SPEC_REPORT_REQUEST, SPEC_REPORT_RESPONSE
from tests.unit.reporter.conftest import OK, UNAVAILABLE

SNAP = ThreadContextSnapshot.model_validate_json(json.dumps(SNAPSHOT))


class _Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


async def test_http_delivery_posts_the_5_2_body_with_identity_headers_and_returns_the_interval(serve) -> None:
    server = serve([OK])
    delivery = HttpDelivery(server.url, token="tok-1")
    assert await delivery.send_snapshot(SNAP) == 5
    [(path, headers, body)] = server.requests
    assert path == "/api/v1/workers/worker-mac-01/thread-context"
    assert headers["Authorization"] == "Bearer tok-1"
    assert headers["Idempotency-Key"] == "snap-1"
    assert headers["X-Snapshot-Version"] == "7"
    assert WorkerReportRequest.model_validate_json(body) == WorkerReportRequest.model_validate_json(
        json.dumps(SPEC_REPORT_REQUEST)
    )


async def test_http_delivery_retries_503_honouring_retry_after(serve) -> None:
    server = serve([UNAVAILABLE, (503, {}, b""), OK])
    sleeps = _Sleeps()
    delivery = HttpDelivery(server.url, retry=RetryPolicy(attempts=5, base_delay_seconds=0.25), sleep=sleeps)
    assert await delivery.send_snapshot(SNAP) == 5
    assert sleeps == [2.0, 0.5]  # the server's Retry-After, then backoff 0.25 x 2^1
    assert len(server.requests) == 3


async def test_http_delivery_gives_up_after_its_attempts(serve) -> None:
    server = serve([UNAVAILABLE])
    delivery = HttpDelivery(server.url, retry=RetryPolicy(attempts=3), sleep=_Sleeps())
    with pytest.raises(DeliveryError, match="gave up after 3 attempts"):
        await delivery.send_snapshot(SNAP)
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_http_delivery_does_not_retry_a_report_the_receiver_finds_invalid(serve, status: int) -> None:
    server = serve([(status, {}, b'{"detail":"bad"}')])
    with pytest.raises(RejectedRecord, match=str(status)):
        await HttpDelivery(server.url, sleep=_Sleeps()).send_snapshot(SNAP)
    assert len(server.requests) == 1


async def test_http_delivery_sets_aside_a_record_refused_for_its_thread_and_keeps_one_refused_for_the_token(
    serve,
) -> None:
    """Issue 38.5: a 403 (a thread of another project) is about that record's thread; a 401 about every record."""
    server = serve([(403, {}, b'{"detail":"this thread belongs to another project"}'), (401, {}, b"{}")])
    delivery = HttpDelivery(server.url, sleep=_Sleeps())
    with pytest.raises(RefusedRecord, match="403"):
        await delivery.send_snapshot(SNAP)
    with pytest.raises(DeliveryError, match="401"):
        await delivery.send_snapshot(SNAP)
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [401, 404, 500, 501])
async def test_http_delivery_keeps_a_report_refused_for_a_reason_outside_the_record(serve, status: int) -> None:
    """A bad token, a wrong URL or a broken server is the operator's to fix: the record stays to be sent again."""
    server = serve([(status, {}, b'{"detail":"no"}')])
    with pytest.raises(DeliveryError, match=str(status)):
        await HttpDelivery(server.url, sleep=_Sleeps()).send_snapshot(SNAP)
    assert len(server.requests) == 1  # no quick retries: the spool's backoff waits for the fix


async def test_http_delivery_retries_an_unreachable_api() -> None:
    sleeps = _Sleeps()
    delivery = HttpDelivery("http://127.0.0.1:9", retry=RetryPolicy(attempts=2), sleep=sleeps)  # discard port: refused
    with pytest.raises(DeliveryError):
        await delivery.send_snapshot(SNAP)
    assert len(sleeps) == 1


def test_retry_after_as_an_http_date_is_honoured() -> None:
    from email.message import Message

    from reporter.delivery.http import retry_after_seconds

    headers = Message()
    headers["Retry-After"] = "Wed, 25 Mar 2026 07:00:09 GMT"
    assert retry_after_seconds(headers, datetime(2026, 3, 25, 7, 0, tzinfo=UTC)) == 9.0


def test_kafka_records_go_to_the_prefixed_input_topics_keyed_by_thread() -> None:
    record = snapshot_record(SNAP, "ctx.")
    assert (record.topic, record.key) == ("ctx.snapshots", b"thread-abc")
    assert ThreadContextSnapshot.model_validate_json(record.value) == SNAP
    event = SESSION_EVENT_ADAPTER.validate_python(
        {
            "type": "compact_requested",
            "thread_id": "thread-abc",
            "event_id": "e1",
            "occurred_at": SNAP.captured_at,
            "requested_by": "u1",
        }
    )
    record = event_record(event, "ctx.")
    assert (record.topic, record.key) == ("ctx.session-events", b"thread-abc")
    assert SESSION_EVENT_ADAPTER.validate_json(record.value) == event


async def test_http_delivery_posts_a_session_event_to_its_workers_route_and_retries_it(serve) -> None:
    server = serve([UNAVAILABLE, (202, {}, b"")])
    event = SESSION_EVENT_ADAPTER.validate_python(
        {
            "type": "compaction_completed",
            "thread_id": "thread-abc",
            "event_id": "compaction-1",
            "occurred_at": datetime(2026, 3, 25, 7, 0, tzinfo=UTC),
            "worker_id": "worker-mac-01",
            "trigger_mode": "request_start",
        }
    )
    await HttpDelivery(server.url, token="tok-1", sleep=_Sleeps()).send_event(event)
    assert server.statuses == [503, 202]
    path, headers, body = server.requests[-1]
    assert (path, headers["Authorization"]) == ("/api/v1/workers/worker-mac-01/session-events", "Bearer tok-1")
    assert SESSION_EVENT_ADAPTER.validate_json(body) == event
    with pytest.raises(RejectedRecord, match="names no worker_id"):
        await HttpDelivery(server.url).send_event(event.model_copy(update={"worker_id": None}))


async def test_http_delivery_posts_several_events_as_one_array_and_a_refused_one_rejects_the_batch(serve) -> None:
    server = serve([(202, {}, b""), (422, {}, b'{"detail":[{"loc":["body",1]}]}')])
    events = [
        SESSION_EVENT_ADAPTER.validate_python(
            {
                "type": "compaction_completed",
                "thread_id": thread,
                "event_id": f"compaction-{thread}",
                "occurred_at": datetime(2026, 3, 25, 7, 0, tzinfo=UTC),
                "worker_id": "worker-mac-01",
                "trigger_mode": "request_start",
            }
        )
        for thread in ("a", "b")
    ]
    await HttpDelivery(server.url).send_events(events)
    [(path, _, body)] = server.requests
    assert path == "/api/v1/workers/worker-mac-01/session-events"
    assert [SESSION_EVENT_ADAPTER.validate_json(json.dumps(item)) for item in json.loads(body)] == events
    with pytest.raises(RejectedRecord, match="422"):
        await HttpDelivery(server.url).send_events(events)
    with pytest.raises(RejectedRecord, match="one worker_id"):
        await HttpDelivery(server.url).send_events([events[0], events[1].model_copy(update={"worker_id": "other"})])
    assert len(server.requests) == 2


async def test_http_delivery_keeps_its_connection_and_replaces_one_the_server_closed() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    connections: list[int] = []

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            connections.append(id(self))

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps(SPEC_REPORT_RESPONSE).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            if self.server.close_next:  # type: ignore[attr-defined]
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    server.close_next = False  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    delivery = HttpDelivery(f"http://127.0.0.1:{server.server_port}", retry=RetryPolicy(attempts=1))
    try:
        for _ in range(5):
            await delivery.send_snapshot(SNAP)
        assert len(connections) == 1  # five reports, one connection
        server.close_next = True  # type: ignore[attr-defined]
        await delivery.send_snapshot(SNAP)
        server.close_next = False  # type: ignore[attr-defined]
        await delivery.send_snapshot(SNAP)
        assert len(connections) == 2  # the closed one was not reused
    finally:
        await delivery.close()
        server.shutdown()
