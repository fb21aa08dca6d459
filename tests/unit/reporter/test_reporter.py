from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reporter.cli import file_lines
from reporter.codex.app_server import CodexAppServerParser
from reporter.codex.rollouts import RolloutTailer
from reporter.delivery import DeliveryError, RejectedRecord
from reporter.delivery.spool import Spool
from reporter.delivery.spooled import SpooledDelivery
from reporter.readings import Identity
from reporter.reporter import Reporter, run_app_server, run_events, run_rollouts
from schemas import (
    CompactionCompleted,
    CompactionStarted,
    ContextBudgetLevel,
    SessionEvent,
    SourceKind,
    ThreadContextSnapshot,
)
from tests.unit.reporter.conftest import FIXTURES, ROLLOUT_FILE

IDENTITY = Identity(node_id="mac-01", worker_id="worker-mac-01", project_id="proj-001", task_id="task-017")
T0 = datetime(2026, 3, 25, 7, 0, tzinfo=UTC)


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class _Delivery:
    def __init__(self, down: int = 0) -> None:
        self.snapshots: list[ThreadContextSnapshot] = []
        self.events: list[SessionEvent] = []
        self.down = down
        self.events_down = 0

    async def send_snapshot(self, snapshot: ThreadContextSnapshot) -> int | None:
        if self.down:
            self.down -= 1
            raise DeliveryError("down")
        self.snapshots.append(snapshot)
        return None

    async def send_event(self, event: SessionEvent) -> None:
        if self.events_down:
            self.events_down -= 1
            raise DeliveryError("down")
        self.events.append(event)

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        for event in events:
            await self.send_event(event)

    async def close(self) -> None:
        return None


async def _ticking(lines: list[str], clock: _Clock, reporter: Reporter) -> AsyncIterator[str]:
    """One line a second, each after the reporter has sent what was due (a stream slower than the delivery)."""
    for line in lines:
        while reporter.cadence.due(clock.now):  # noqa: ASYNC110 - a pure condition, no event to wait on
            await asyncio.sleep(0)
        clock.now += timedelta(seconds=1)
        yield line


async def _report_app_server(lines: list[str]) -> list[ThreadContextSnapshot]:
    clock, delivery = _Clock(), _Delivery()
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    await run_app_server(reporter, _ticking(lines, clock, reporter))
    return delivery.snapshots


async def test_app_server_session_reports_level_changes_and_the_compaction_at_once(app_server_lines) -> None:
    sent = await _report_app_server(app_server_lines)
    # The displayed percents of this session in Codex are 81, 44, 11, 93, 64 (codex/test_app_server.py); the
    # snapshots carry the budget: room before Codex's auto-compaction at 90% of the model's window, hence lower.
    assert [(round(s.context_budget_remaining_pct), s.context_budget_level, s.compaction_count) for s in sent] == [
        (79, ContextBudgetLevel.SAFE, 0),
        (41, ContextBudgetLevel.WATCH, 0),  # Codex shows 44% left, but only 41% of the room before compaction
        (5, ContextBudgetLevel.CRITICAL, 0),
        (92, ContextBudgetLevel.SAFE, 1),  # the usage Codex sends within the compaction is after it
        (62, ContextBudgetLevel.SAFE, 1),  # not significant: sent when the input ends
    ]
    assert all(s.source_kind is SourceKind.CODEX_APP_SERVER for s in sent)
    assert (sent[0].node_id, sent[0].worker_id, sent[0].project_id, sent[0].task_id) == (
        "mac-01",
        "worker-mac-01",
        "proj-001",
        "task-017",
    )
    versions = [s.snapshot_version for s in sent]
    assert versions == sorted(set(versions))


async def test_the_same_input_gives_the_same_snapshot_ids(app_server_lines) -> None:
    first = await _report_app_server(app_server_lines)
    again = await _report_app_server(app_server_lines)
    assert [s.snapshot_id for s in first] == [s.snapshot_id for s in again]
    assert len({s.snapshot_id for s in first}) == len(first)


async def test_a_failed_delivery_is_retried_after_the_pause() -> None:
    clock, delivery = _Clock(), _Delivery(down=1)
    tailer = RolloutTailer(FIXTURES, Path("/nonexistent/state.json"))
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    for reading in tailer.poll():
        reporter.observe(reading)
    assert await reporter.flush() == 0
    assert reporter.seconds_until_due() == 5.0
    clock.now += timedelta(seconds=5)
    assert await reporter.flush() == 1  # the most recent reading; earlier ones were superseded before sending


async def test_a_restarted_rollout_reporter_resends_its_last_reading_as_a_duplicate(tmp_path: Path) -> None:
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    state = tmp_path / "state.json"
    clock = _Clock()
    before, after = _Delivery(), _Delivery()
    tailer = RolloutTailer(tmp_path, state)
    reporter = Reporter(IDENTITY, before, clock=clock)
    for reading in tailer.poll():
        reporter.observe(reading)
    await reporter.flush(final=True)
    tailer.commit()

    restarted = Reporter(IDENTITY, after, clock=clock)
    for reading in RolloutTailer(tmp_path, state).restored():
        restarted.observe(reading)
    await restarted.flush()
    assert [s.snapshot_id for s in after.snapshots] == [before.snapshots[-1].snapshot_id]
    assert after.snapshots[0] == before.snapshots[-1]  # same id, version and captured_at: the engine drops it


async def test_must_finish_goes_out_at_once_with_a_newer_version(app_server_lines) -> None:
    clock, delivery = _Clock(), _Delivery()
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    await run_app_server(reporter, _ticking(app_server_lines, clock, reporter))
    clock.now += timedelta(seconds=1)
    reporter.set_must_finish("thr_a", True)
    assert await reporter.flush() == 1
    previous, flagged = delivery.snapshots[-2:]
    assert flagged.must_finish_before_compaction
    assert flagged.snapshot_version == previous.snapshot_version + 1


async def test_session_events_pass_through_after_validation() -> None:
    delivery = _Delivery()
    skipped = await run_events(delivery, file_lines(FIXTURES / "session_events.jsonl"))
    assert [e.event_id for e in delivery.events] == ["ev-1", "ev-2", "ev-4"]
    assert skipped.counts == {"validation_error": 1}


async def test_a_directory_of_old_rollouts_is_reported_once_at_its_own_times_not_revived() -> None:
    clock, delivery = _Clock(), _Delivery()
    clock.now = T0 + timedelta(days=30)  # the reporter starts a month after the session ended
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    for reading in RolloutTailer(FIXTURES, Path("/nonexistent/state.json")).poll():
        reporter.observe(reading)
    await reporter.flush()
    for _ in range(100):  # an hour of the reporter's time
        clock.now += timedelta(seconds=36)
        await reporter.flush()
    [snapshot] = delivery.snapshots
    assert snapshot.captured_at == datetime(2026, 3, 25, 7, 30, tzinfo=UTC)  # its last line's timestamp
    assert reporter.seconds_until_due() is None


def _usage_line(thread: str, total: int) -> str:
    usage = {"totalTokens": total}
    token_usage = {"total": usage, "last": usage, "modelContextWindow": 258_400}
    return json.dumps(
        {
            "method": "thread/tokenUsage/updated",
            "params": {"threadId": thread, "turnId": "u1", "tokenUsage": token_usage},
        }
    )


def _compaction_line(thread: str, phase: str = "completed") -> str:
    item = {"type": "contextCompaction", "id": "c1"}
    return json.dumps({"method": f"item/{phase}", "params": {"threadId": thread, "turnId": "u1", "item": item}})


def _take(parser: CodexAppServerParser, reporter: Reporter, line: str) -> None:
    """As `run_app_server` does: the line's derived events, then its reading."""
    reading = parser.feed(line, reporter.clock())
    reporter.add_events(parser.take_events())
    if reading is not None:
        reporter.observe(reading)


async def test_after_a_compaction_the_old_usage_is_not_sent_as_current_until_the_tool_reports_again() -> None:
    clock, delivery = _Clock(), _Delivery()
    reporter, parser = Reporter(IDENTITY, delivery, clock=clock), CodexAppServerParser()

    async def feed(line: str) -> None:
        _take(parser, reporter, line)
        await reporter.flush()

    await feed(_usage_line("t", 240_000))  # critical
    clock.now += timedelta(seconds=1)
    await feed(_compaction_line("t"))
    compacted_at = clock.now
    for _ in range(60):  # a minute with no usage: critical would be re-sent every 5 s
        clock.now += timedelta(seconds=1)
        await reporter.flush()
    [before] = delivery.snapshots  # nothing re-presents the pre-compaction occupancy as current
    assert before.context_budget_level is ContextBudgetLevel.CRITICAL
    assert before.captured_at == T0

    await feed(_usage_line("t", 30_000))
    after = delivery.snapshots[-1]
    assert len(delivery.snapshots) == 2
    assert (after.compaction_count, after.last_compaction_at) == (1, compacted_at)
    assert (after.context_budget_level, after.captured_at) == (ContextBudgetLevel.SAFE, clock.now)


async def test_a_compaction_notice_is_said_at_once_as_an_event_and_no_stale_percent_is_sent() -> None:
    clock, delivery = _Clock(), _Delivery()
    reporter, parser = Reporter(IDENTITY, delivery, clock=clock), CodexAppServerParser()

    async def feed(line: str) -> None:
        _take(parser, reporter, line)
        await reporter.flush()

    await feed(_usage_line("t", 240_000))
    clock.now += timedelta(seconds=1)
    await feed(_compaction_line("t"))
    start, event = delivery.events  # its start too: the projection records at the start whether a package was ready
    assert isinstance(start, CompactionStarted)
    assert isinstance(event, CompactionCompleted)
    assert (start.occurred_at, start.tokens_before, start.trigger_mode) == (clock.now, 240_000, event.trigger_mode)
    assert (event.thread_id, event.occurred_at, event.tokens_before, event.tokens_after) == (
        "t",
        clock.now,
        240_000,  # the usage the tool last reported, of before the compaction
        None,  # unknown until the tool reports usage again
    )
    assert (event.project_id, event.worker_id, event.node_id) == ("proj-001", "worker-mac-01", "mac-01")
    assert [s.captured_at for s in delivery.snapshots] == [T0]  # no snapshot with the stale percent
    for _ in range(30):
        clock.now += timedelta(seconds=1)
        await reporter.flush()
    assert (len(delivery.events), len(delivery.snapshots)) == (2, 1)  # said once, and still no stale percent

    # the same notice read again (a restarted reporter re-reads the line) is the same event: consumers drop it
    again = Reporter(IDENTITY, delivery, clock=clock)
    _take(CodexAppServerParser(), again, _compaction_line("t"))
    await again.flush()
    assert [e.event_id for e in delivery.events[2:]] == [start.event_id, event.event_id]


async def test_a_compaction_event_not_delivered_is_kept_and_sent_later() -> None:
    clock, delivery = _Clock(), _Delivery()
    reporter, parser = Reporter(IDENTITY, delivery, clock=clock), CodexAppServerParser()
    for line in (_usage_line("t", 240_000), _compaction_line("t"), _usage_line("u", 30_000)):
        _take(parser, reporter, line)
    delivery.events_down = 1
    await reporter.flush()
    assert delivery.events == []
    assert [s.thread_id for s in delivery.snapshots] == ["u"]  # an event not delivered holds no snapshot back
    clock.now += timedelta(seconds=10)
    await reporter.flush()
    assert [e.type for e in delivery.events] == ["compaction_started", "compaction_completed"]


async def test_a_compaction_event_not_delivered_at_exit_is_kept_for_the_next_run(tmp_path) -> None:
    pending = tmp_path / "pending_events.jsonl"
    clock, delivery = _Clock(), _Delivery()
    reporter, parser = Reporter(IDENTITY, delivery, clock=clock, pending_events=pending), CodexAppServerParser()
    for line in (_usage_line("t", 240_000), _compaction_line("t")):
        _take(parser, reporter, line)
    delivery.events_down = 1
    await reporter.flush(final=True)
    assert delivery.events == []
    assert reporter.events_left == 2

    restarted = Reporter(IDENTITY, delivery, clock=clock, pending_events=pending)
    assert restarted.events_left == 2
    await restarted.flush()
    assert [e.type for e in delivery.events] == ["compaction_started", "compaction_completed"]
    assert restarted.events_left == 0
    assert Reporter(IDENTITY, delivery, clock=clock, pending_events=pending).events_left == 0


class _RefusingEvents(_Delivery):
    async def send_event(self, event: SessionEvent) -> None:
        raise RejectedRecord("422: invalid event")


async def test_a_compaction_event_the_receiver_rejects_is_set_aside_beside_the_spool(tmp_path) -> None:
    clock, spooled = _Clock(), SpooledDelivery(Spool(tmp_path), _RefusingEvents())
    reporter, parser = Reporter(IDENTITY, spooled, clock=clock), CodexAppServerParser()
    for line in (_usage_line("t", 240_000), _compaction_line("t")):
        _take(parser, reporter, line)
    await reporter.flush()
    kept = [json.loads(line) for line in spooled.rejected_path.read_text().splitlines()]
    assert [k["reason"] for k in kept] == ["422: invalid event"] * 2
    assert [k["session_event"]["type"] for k in kept] == ["compaction_started", "compaction_completed"]
    assert (spooled.rejected, reporter.events_left) == (2, 0)


async def test_an_app_server_compaction_is_sent_as_events_as_it_starts_and_ends(app_server_lines) -> None:
    """Issue 35.4: the app-server's compactions reached no compaction_events row; the start goes out while Codex
    still compacts (the projection records then whether a package was ready), the end with the usage after it."""
    clock, delivery = _Clock(), _Delivery()
    reporter, parser = Reporter(IDENTITY, delivery, clock=clock), CodexAppServerParser()
    _take(parser, reporter, _usage_line("t", 240_000))
    _take(parser, reporter, _compaction_line("t", "started"))
    await reporter.flush()
    assert [e.type for e in delivery.events] == ["compaction_started"]
    assert (delivery.events[0].project_id, delivery.events[0].tokens_before) == ("proj-001", 240_000)
    clock.now += timedelta(seconds=3)
    _take(parser, reporter, _usage_line("t", 30_000))  # Codex's estimate of the compacted context, before the end
    await reporter.flush()
    assert [s.compaction_count for s in delivery.snapshots] == [0]  # not a reading of before the compaction
    _take(parser, reporter, _compaction_line("t"))
    await reporter.flush()
    assert [e.type for e in delivery.events] == ["compaction_started", "compaction_completed"]
    assert delivery.events[1].tokens_after == 30_000
    after = delivery.snapshots[-1]
    assert (after.compaction_count, after.last_compaction_at, after.context_budget_level) == (
        1,
        clock.now,
        ContextBudgetLevel.SAFE,
    )

    sent = _Delivery()  # and through run_app_server, as `ctxbudget report --from codex-app-server` reads a stream
    await run_app_server(Reporter(IDENTITY, sent, clock=_Clock()), _lines(app_server_lines))
    assert [e.type for e in sent.events] == ["compaction_started", "compaction_completed"]


async def _lines(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_a_stop_that_lands_as_the_loop_is_woken_still_stops_it() -> None:
    """Ctrl-C or SIGTERM cancels the rollout loop; a cancel arriving in the same turn as a wake-up (a delivery's
    answer) must not be swallowed, or the reporter tails on after its stop (asyncio.wait_for on 3.11 does that)."""
    for turns in range(6):  # the cancel lands 0..5 scheduler turns after the wake-up: the window is among them
        reporter = Reporter(IDENTITY, _Delivery(), clock=_Clock())
        task = asyncio.create_task(run_rollouts(reporter, [], poll_seconds=30))
        for _ in range(5):
            await asyncio.sleep(0)  # into its wait
        reporter.woken.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        assert done, f"cancelled {turns} turns after the wake-up, the loop went on"
        assert task.cancelled()
