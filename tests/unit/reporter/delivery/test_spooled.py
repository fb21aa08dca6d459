from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from core.profiles import TokenUsage
from reporter.delivery import DeliveryError, RejectedRecord, RetryDelays
from reporter.delivery.http import HttpDelivery, RetryPolicy
from reporter.delivery.spool import Spool
from reporter.delivery.spooled import REJECTED_NAME, SpooledDelivery
from reporter.readings import Reading
from reporter.reporter import Reporter, run_app_server
from schemas import CompactionStarted, SessionEvent, SourceKind, ThreadContextSnapshot, TriggerMode
from tests.samples import SPEC_REPORT_RESPONSE
from tests.unit.reporter.conftest import OK
from tests.unit.reporter.delivery.test_spool import snap
from tests.unit.reporter.test_reporter import IDENTITY, T0, _Clock, _Delivery, _report_app_server, _ticking

QUICK = RetryDelays(base_delay_seconds=0.01, max_delay_seconds=0.05)


async def _until(condition, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - the condition is another thread's doing
            await asyncio.sleep(0.01)


def _spooled(directory: Path, url: str) -> SpooledDelivery:
    """One request per try: the spool's own backoff waits the outage out (Retry-After is honoured up to its cap)."""
    return SpooledDelivery(Spool(directory), HttpDelivery(url, retry=RetryPolicy(attempts=1)), QUICK, drain_seconds=0)


async def test_api_down_for_a_while_then_every_snapshot_arrives_once_in_order(serve, tmp_path: Path) -> None:
    api = serve([OK])
    api.down = True
    sent = [snap(thread, version) for version in range(1, 5) for thread in ("a", "b", "c")]

    first = _spooled(tmp_path, api.url)
    await first.start()
    for snapshot in sent[:6]:
        await first.send_snapshot(snapshot)
    await _until(lambda: len(api.requests) >= 3)
    await first.close()  # the reporter stops while the API is still down

    restarted = _spooled(tmp_path, api.url)
    await restarted.start()
    for snapshot in sent[6:]:
        await restarted.send_snapshot(snapshot)
    await _until(lambda: len(api.requests) >= 6)
    api.down = False
    async with asyncio.timeout(10):
        await restarted.drained()
    await restarted.close()

    arrived = [
        (headers["Idempotency-Key"], int(headers["X-Snapshot-Version"]))
        for (_, headers, _), status in zip(api.requests, api.statuses, strict=True)
        if status == 200
    ]
    assert arrived == [(s.snapshot_id, s.snapshot_version) for s in sent]
    assert len(Spool(tmp_path)) == 0


class _Refusing(_Delivery):
    """Unavailable for `down` tries, asking each time to wait `retry_after` seconds."""

    def __init__(self, down: int, retry_after: float | None) -> None:
        super().__init__()
        self.refusals = down
        self.retry_after = retry_after

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        if self.refusals:
            self.refusals -= 1
            raise DeliveryError("down", self.retry_after)
        self.snapshots.append(snapshot)
        return None


class _Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)
        await asyncio.sleep(0)


async def test_delivery_backs_off_exponentially_and_honours_retry_after(tmp_path: Path) -> None:
    for retry_after, expected in ((None, [1.0, 2.0, 4.0]), (7.0, [7.0, 7.0, 7.0]), (600.0, [60.0, 60.0, 60.0])):
        sleeps = _Sleeps()
        inner = _Refusing(3, retry_after)
        spooled = SpooledDelivery(Spool(tmp_path / str(retry_after)), inner, sleep=sleeps)
        await spooled.start()
        await spooled.send_snapshot(snap("a", 1))
        await spooled.drained()
        await spooled.close()
        assert (sleeps, [s.snapshot_id for s in inner.snapshots]) == (expected, ["a-1"])


class _Hanging(_Delivery):
    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        await asyncio.Event().wait()
        return None

    async def send_event(self, event: SessionEvent) -> None:
        raise DeliveryError("down")  # the session's compaction events: kept for later, as when the API is away


async def test_the_app_server_reader_never_waits_for_a_hanging_sink(app_server_lines, tmp_path: Path) -> None:
    clock = _Clock()
    spooled = SpooledDelivery(Spool(tmp_path), _Hanging(), drain_seconds=0)
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled, clock=clock)
    async with asyncio.timeout(5):
        await run_app_server(reporter, _ticking(app_server_lines, clock, reporter))
    await spooled.close()
    expected = await _report_app_server(app_server_lines)
    assert [record.snapshot for record in Spool(tmp_path)] == expected  # all kept for the next run


async def test_a_spooled_reporter_delivers_what_a_direct_one_does_despite_failures(app_server_lines, tmp_path) -> None:
    clock, inner = _Clock(), _Refusing(3, None)
    spooled = SpooledDelivery(Spool(tmp_path), inner, sleep=_Sleeps())
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled, clock=clock)
    await run_app_server(reporter, _ticking(app_server_lines, clock, reporter))
    await spooled.drained()
    await spooled.close()
    assert inner.snapshots == await _report_app_server(app_server_lines)


async def test_the_engines_answered_interval_sets_the_cadence_of_a_spooled_reporter(serve, tmp_path: Path) -> None:
    api = serve([OK])  # answers next_required_report_in_seconds = 5 (spec 5.2's example)
    clock = _Clock()
    spooled = _spooled(tmp_path, api.url)
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled, clock=clock)
    reporter.observe(Reading("t", SourceKind.CODEX_APP_SERVER, 1, T0, TokenUsage(50_000), 258_400))
    await reporter.flush()
    assert reporter.seconds_until_due() == 30.0  # safe, until the engine says otherwise (spec 5.1)
    await spooled.drained()
    assert reporter.seconds_until_due() == 5.0
    await spooled.close()
    assert json.loads(api.requests[0][2])["source_kind"] == "codex_app_server"


async def test_an_answered_interval_takes_effect_at_once_while_the_input_is_quiet(serve, tmp_path: Path) -> None:
    every_second = json.dumps({**SPEC_REPORT_RESPONSE, "next_required_report_in_seconds": 1}).encode()
    api = serve([(200, {"Content-Type": "application/json"}, every_second)])
    spooled = _spooled(tmp_path, api.url)
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled)  # the real clock: the loop's own sleeps are under test
    quiet = asyncio.Event()

    async def one_reading_then_quiet() -> AsyncIterator[str]:
        usage = {"totalTokens": 50_000}
        token_usage = {"total": usage, "last": usage, "modelContextWindow": 258_400}
        params = {"threadId": "t", "turnId": "u", "tokenUsage": token_usage}
        yield json.dumps({"method": "thread/tokenUsage/updated", "params": params})
        await quiet.wait()

    loop = asyncio.create_task(run_app_server(reporter, one_reading_then_quiet()))
    try:
        await _until(lambda: len(api.requests) >= 3, seconds=5)  # safe is every 30 s, the engine said every 1 s
    finally:
        quiet.set()
        await loop
        await spooled.close()


class _Rejecting(_Delivery):
    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        if snapshot.snapshot_version == 2:
            raise RejectedRecord("422 captured_at is out of range")
        return await super().send_snapshot(snapshot)


async def test_a_record_the_receiver_rejects_is_set_aside_in_a_dead_letter_file(tmp_path: Path) -> None:
    inner = _Rejecting()
    spooled = SpooledDelivery(Spool(tmp_path), inner)
    await spooled.start()
    for version in (1, 2, 3):
        await spooled.send_snapshot(snap("a", version))
    await spooled.drained()
    await spooled.close()
    assert [s.snapshot_version for s in inner.snapshots] == [1, 3]
    assert (spooled.delivered, spooled.rejected, len(Spool(tmp_path))) == (2, 1, 0)
    [line] = (tmp_path / REJECTED_NAME).read_text().splitlines()
    rejected = json.loads(line)
    assert rejected["reason"] == "422 captured_at is out of range"
    assert ThreadContextSnapshot.model_validate_json(json.dumps(rejected["snapshot"])) == snap("a", 2)


async def test_a_rounds_snapshots_go_into_the_spool_in_one_append(tmp_path: Path, monkeypatch) -> None:
    spool = Spool(tmp_path)
    appended: list[int] = []
    real_append = spool.append
    monkeypatch.setattr(spool, "append", lambda snapshots: (appended.append(len(snapshots)), real_append(snapshots)))
    inner = _Delivery()
    spooled = SpooledDelivery(spool, inner, QUICK, drain_seconds=5)
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled, clock=_Clock())
    for thread in ("a", "b", "c"):
        reporter.observe(Reading(thread, SourceKind.CODEX_APP_SERVER, 1, T0, TokenUsage(50_000), 258_400))
    assert await reporter.flush() == 3
    assert appended == [3]  # one fsync for the round
    await spooled.drained()
    await spooled.close()
    assert sorted(s.thread_id for s in inner.snapshots) == ["a", "b", "c"]


async def test_a_2xx_answer_that_is_no_report_answer_keeps_the_snapshot_until_one_is(serve, tmp_path: Path) -> None:
    not_an_answer = {key: value for key, value in SPEC_REPORT_RESPONSE.items() if key != "master_actions"}
    api = serve([(200, {"Content-Type": "application/json"}, json.dumps(not_an_answer).encode()), OK])
    spooled = _spooled(tmp_path, api.url)
    await spooled.start()
    await spooled.send_snapshot(snap("a", 1))
    await spooled.send_snapshot(snap("a", 2))
    async with asyncio.timeout(10):
        await spooled.drained()
    await spooled.close()
    sent = [(headers["Idempotency-Key"], headers["X-Snapshot-Version"]) for _, headers, _ in api.requests]
    assert sent == [("a-1", "1"), ("a-1", "1"), ("a-2", "2")]
    assert (spooled.delivered, len(Spool(tmp_path))) == (2, 0)


class _Failing(_Delivery):
    """Raises what no delivery should (a bug) on its first try."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        if not self.failed:
            self.failed = True
            raise KeyError("a bug")
        return await super().send_snapshot(snapshot)


async def test_an_unexpected_error_delivering_a_snapshot_never_stops_the_spools_delivery(tmp_path: Path) -> None:
    inner = _Failing()
    spooled = SpooledDelivery(Spool(tmp_path), inner, QUICK)
    await spooled.start()
    await spooled.send_snapshot(snap("a", 1))
    async with asyncio.timeout(10):
        await spooled.drained()
    await spooled.close()
    assert ([s.snapshot_id for s in inner.snapshots], len(Spool(tmp_path))) == (["a-1"], 0)


class _ProjectApi:
    """The API for a token of one project: 403 for every write that names the other project's thread `theirs`."""

    def __init__(self) -> None:
        self.accepted: list[tuple[str, str]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                records = body if isinstance(body, list) else [body]
                if any(record.get("thread_id") == "theirs" for record in records):
                    status, answer = 403, b'{"detail":"this thread belongs to another project"}'
                else:
                    api.accepted.extend((self.path.rsplit("/", 1)[-1], r["thread_id"]) for r in records)
                    status, answer = (200, OK[2]) if "thread-context" in self.path else (202, b"")
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


async def test_one_refused_thread_holds_back_no_other_threads_records(tmp_path: Path, caplog) -> None:
    """Issue 38.5: a transcript whose session id is another project's thread (403) blocked every later snapshot and
    session event of all of the reporter's threads, forever, logging each retry."""
    api = _ProjectApi()
    threading.Thread(target=api.httpd.serve_forever, args=(0.05,), daemon=True).start()
    clock = _Clock()
    spooled = _spooled(tmp_path, api.url)
    await spooled.start()
    reporter = Reporter(IDENTITY, spooled, clock=clock)
    try:
        for second in range(6):
            for thread in ("theirs", "mine"):
                reporter.observe(_reading(thread, second, 200_000 if second % 2 else 20_000))
                reporter.add_events([_event(thread, second)])
            await reporter.flush()
            clock.now += timedelta(seconds=1)
        await _until(lambda: len(spooled.spool) == 0)
    finally:
        await spooled.close()
        api.httpd.shutdown()
        api.httpd.server_close()
    assert ("thread-context", "mine") in api.accepted
    assert [thread for route, thread in api.accepted if route == "session-events"] == ["mine"] * 6
    assert {thread for _, thread in api.accepted} == {"mine"}
    kept = [json.loads(line) for line in spooled.rejected_path.read_text().splitlines()]
    assert {(k.get("snapshot") or k.get("session_event"))["thread_id"] for k in kept} == {"theirs"}
    assert len([k for k in kept if "session_event" in k]) == 6  # kept, with the reason, not lost
    assert all("403" in k["reason"] for k in kept)
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 2  # once per kind of record of the refused thread, not once per record or retry


def _reading(thread: str, second: int, total: int) -> Reading:
    return Reading(
        thread_id=thread,
        source_kind=SourceKind.CODEX_APP_SERVER,
        position=second + 1,
        observed_at=T0 + timedelta(seconds=second),
        last_usage=TokenUsage(total_tokens=total),
        context_window=258_400,
    )


def _event(thread: str, second: int) -> SessionEvent:
    return CompactionStarted(
        thread_id=thread,
        event_id=f"{thread}-{second}",
        occurred_at=T0 + timedelta(seconds=second),
        trigger_mode=TriggerMode.REQUEST_START,
    )
