from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.profiles import DEFAULT_CODEX_VERSION
from reporter.codex.app_server import CodexAppServerParser
from reporter.readings import Reading
from schemas import SourceKind, TriggerMode

T0 = datetime(2026, 3, 25, 7, 0, tzinfo=UTC)


def _feed(lines: list[str]) -> tuple[CodexAppServerParser, list[tuple[datetime, Reading]]]:
    parser = CodexAppServerParser()
    out = []
    for i, line in enumerate(lines):
        now = T0 + timedelta(seconds=i)
        if (reading := parser.feed(line, now)) is not None:
            out.append((now, reading))
    return parser, out


def test_a_session_that_grows_compacts_and_grows_again(app_server_lines: list[str]) -> None:
    _, readings = _feed(app_server_lines)
    assert [(_shown(r), r.compaction_count) for _, r in readings] == [
        (81.0, 0),
        (44.0, 0),  # reasoning tokens counted, as current Codex versions count them
        (11.0, 0),
        (93.0, 1),  # the usage Codex recomputes after compacting, sent before the item completes: counted after it
        (64.0, 1),
    ]
    compacted_at = readings[3][0]
    assert all(r.last_compaction_at == compacted_at for _, r in readings[3:])
    assert not any(r.usage_stale for _, r in readings)
    assert {r.source_kind for _, r in readings} == {SourceKind.CODEX_APP_SERVER}
    assert {r.context_window for _, r in readings} == {258_400}


def test_occupancy_is_the_last_request_not_the_cumulative_total(app_server_lines: list[str]) -> None:
    _, readings = _feed(app_server_lines)
    critical = readings[2][1]
    assert critical.last_usage.total_tokens == 232_000  # the cumulative total of that line is 442,000 > the window


def test_a_compaction_announced_twice_is_counted_once(app_server_lines: list[str]) -> None:
    _, readings = _feed(app_server_lines)
    assert readings[-1][1].compaction_count == 1


def test_malformed_lines_are_counted_not_raised(app_server_lines: list[str]) -> None:
    parser, _ = _feed([*app_server_lines, "[1, 2]", '{"method":"thread/tokenUsage/updated","params":{"threadId":7}}'])
    assert parser.skipped.counts == {"malformed_json": 1, "not_an_object": 1, "malformed_params": 1}


def test_methods_the_reporter_does_not_need_are_counted_quietly(caplog: pytest.LogCaptureFixture) -> None:
    stream = [
        {"method": "thread/started", "params": {"thread": {"id": "thr_a"}}},
        *({"method": "item/agentMessage/delta", "params": {"threadId": "thr_a", "delta": "Hel"}} for _ in range(50)),
        {"method": "item/started", "params": {"threadId": "thr_a", "turnId": "u", "item": {"type": "agentMessage"}}},
        {"method": "codex/someFutureNotification", "params": {}},
    ]
    with caplog.at_level(logging.INFO):
        parser, readings = _feed([json.dumps(message) for message in stream])
    assert readings == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert parser.skipped.counts == {}
    assert parser.ignored == {
        "thread/started": 1,
        "item/agentMessage/delta": 50,
        "item/started": 1,
        "codex/someFutureNotification": 1,
    }


def test_positions_grow_per_thread_even_within_one_millisecond() -> None:
    usage = {"totalTokens": 20_000, "reasoningOutputTokens": 0}
    line = json.dumps(
        {
            "method": "thread/tokenUsage/updated",
            "params": {
                "threadId": "t",
                "turnId": "u",
                "tokenUsage": {"total": usage, "last": usage, "modelContextWindow": 200_000},
            },
        }
    )
    parser = CodexAppServerParser()
    first, second = parser.feed(line, T0), parser.feed(line, T0)
    assert first is not None
    assert second is not None
    assert second.position == first.position + 1 == int(T0.timestamp() * 1000) + 1


def test_a_missing_window_falls_back_to_the_last_one_reported(app_server_lines: list[str]) -> None:
    first = json.loads(app_server_lines[2])
    later = json.loads(app_server_lines[3])
    later["params"]["tokenUsage"]["modelContextWindow"] = None
    parser = CodexAppServerParser()
    parser.feed(json.dumps(first), T0)
    reading = parser.feed(json.dumps(later), T0 + timedelta(seconds=1))
    assert reading is not None
    assert reading.context_window == 258_400


def test_usage_before_any_window_is_skipped() -> None:
    usage = {"totalTokens": 20_000}
    line = json.dumps(
        {
            "method": "thread/tokenUsage/updated",
            "params": {"threadId": "t", "turnId": "u", "tokenUsage": {"total": usage, "last": usage}},
        }
    )
    parser = CodexAppServerParser()
    assert parser.feed(line, T0) is None
    assert parser.skipped.counts == {"no_context_window": 1}


def _shown(reading: Reading) -> float:
    """The percent Codex displays for the reading: it must equal Codex's own."""
    return float(DEFAULT_CODEX_VERSION.displayed_pct(reading.last_usage, reading.context_window))


def _compaction(turn: str) -> str:
    item = {"type": "contextCompaction", "id": f"c-{turn}"}
    return json.dumps({"method": "item/completed", "params": {"threadId": "thr_a", "turnId": turn, "item": item}})


def test_compaction_counts_survive_a_restart_and_a_replayed_stream_is_not_counted_twice(
    app_server_lines: list[str], tmp_path: Path
) -> None:
    state = tmp_path / "spool" / "app_server_threads.json"
    first = CodexAppServerParser(state)
    for i, line in enumerate(app_server_lines):
        first.feed(line, T0 + timedelta(seconds=i))
    compacted_at = T0 + timedelta(seconds=7)  # the item/completed line

    restarted = CodexAppServerParser(state)  # a new reporter process on a new app-server stream
    reading = restarted.feed(app_server_lines[-1], T0 + timedelta(minutes=5))
    assert reading is not None
    assert (reading.compaction_count, reading.last_compaction_at) == (1, compacted_at)
    replayed = CodexAppServerParser(state)  # the same stream read again (a file given with --input)
    readings = [replayed.feed(line, T0 + timedelta(minutes=9, seconds=i)) for i, line in enumerate(app_server_lines)]
    assert [r.compaction_count for r in readings if r is not None][-1] == 1
    later = replayed.feed(_compaction("turn_9"), T0 + timedelta(minutes=10))
    assert later is not None
    assert later.compaction_count == 2
    assert CodexAppServerParser(state).feed(app_server_lines[-1], T0 + timedelta(minutes=11)).compaction_count == 2


def _usage_update(thread: str, turn: str, total: int, **breakdown: int) -> str:
    usage = {"totalTokens": total, "inputTokens": total - 500, "outputTokens": 500} | breakdown
    params = {
        "threadId": thread,
        "turnId": turn,
        "tokenUsage": {"total": usage, "last": usage, "modelContextWindow": 258_400},
    }
    return json.dumps({"method": "thread/tokenUsage/updated", "params": params})


def _numbered_compaction(thread: str, turn: str, window: int) -> str:
    item = {"type": "contextCompaction", "id": f"c-{turn}", "windowNumber": window}
    return json.dumps({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": item}})


def test_window_numbers_are_the_compaction_count_and_say_a_repeat() -> None:
    lines = [
        _usage_update("thr_n", "t1", 200_000),
        _numbered_compaction("thr_n", "t1", 4),  # attached mid-thread: three earlier compactions happened
        json.dumps({"method": "thread/compacted", "params": {"threadId": "thr_n", "turnId": "t1"}}),  # the same one
        _numbered_compaction("thr_n", "t1", 4),  # replayed
        _usage_update("thr_n", "t2", 30_000),
        _numbered_compaction("thr_n", "t2", 5),
    ]
    _, readings = _feed(lines)
    assert [r.compaction_count for _, r in readings] == [0, 4, 4, 5]
    assert [r.usage_stale for _, r in readings] == [False, True, False, True]


def test_cache_write_tokens_are_read_with_the_breakdown() -> None:
    parser = CodexAppServerParser()
    reading = parser.feed(
        _usage_update("thr_c", "t1", 40_000, cachedInputTokens=30_000, cacheWriteInputTokens=2_000), T0
    )
    assert reading is not None
    assert (reading.last_usage.cache_write_input_tokens, reading.last_usage.total_tokens) == (2_000, 40_000)
    bad = _usage_update("thr_c", "t2", 40_000, cacheWriteInputTokens=-1)
    assert parser.feed(bad, T0) is None
    assert parser.skipped.counts == {"malformed_params": 1}


def _item(phase: str, thread: str, turn: str, item: dict, at_ms: int | None = None) -> str:
    params = {"threadId": thread, "turnId": turn, "item": item}
    if at_ms is not None:
        params["startedAtMs" if phase == "started" else "completedAtMs"] = at_ms
    return json.dumps({"method": f"item/{phase}", "params": params})


def test_a_compaction_is_said_as_session_events_with_the_items_times(app_server_lines: list[str]) -> None:
    """Issue 35.4: the app-server sends no session events; its compactions had no row in compaction_events."""
    parser, readings = _feed(app_server_lines)
    started, completed = parser.take_events()
    assert parser.take_events() == []
    assert (started.type, completed.type) == ("compaction_started", "compaction_completed")
    assert {started.trigger_mode, completed.trigger_mode} == {TriggerMode.REQUEST_START}
    assert (started.tokens_before, completed.tokens_before, completed.tokens_after) == (232_000, 232_000, 30_000)
    assert started.occurred_at == T0 + timedelta(seconds=5)  # no item stamps in the fixture: the arrival
    assert completed.occurred_at == T0 + timedelta(seconds=7)
    assert all(r.events_derived for _, r in readings)  # the reporter does not say them a second time
    # the same stream read again gives the same events (consumers drop repeated ids)
    again, _ = _feed(app_server_lines)
    assert [e.event_id for e in again.take_events()] == [started.event_id, completed.event_id]

    stamped = CodexAppServerParser()
    stamped.feed(_usage_update("thr_s", "t1", 240_000), T0)
    stamped.feed(_item("started", "thr_s", "t1", {"type": "contextCompaction", "id": "c1"}, 1_790_000_000_000), T0)
    reading = stamped.feed(
        _item("completed", "thr_s", "t1", {"type": "contextCompaction", "id": "c1"}, 1_790_000_004_000), T0
    )
    begun, ended = stamped.take_events()
    assert ended.occurred_at - begun.occurred_at == timedelta(seconds=4)
    assert reading is not None
    assert reading.last_compaction_at == ended.occurred_at
    assert reading.usage_stale  # no usage since the compaction: the occupancy is unknown
    assert ended.tokens_after is None


def test_the_usage_reported_within_a_compaction_is_after_it_and_only_the_last_counts() -> None:
    """Codex reports the compaction request's usage, then its estimate of the compacted context, both before the item
    completes: neither is a reading of the context before the compaction."""
    item = {"type": "contextCompaction", "id": "c1"}
    lines = [
        _usage_update("thr_u", "t1", 240_000),
        _item("started", "thr_u", "t1", item),
        _usage_update("thr_u", "t1", 251_000),  # the compaction request's own
        _usage_update("thr_u", "t1", 41_000),  # the compacted context
        _item("completed", "thr_u", "t1", item),
        _usage_update("thr_u", "t1", 45_000),
    ]
    parser, readings = _feed(lines)
    assert [(r.last_usage.total_tokens, r.compaction_count, r.usage_stale) for _, r in readings] == [
        (240_000, 0, False),
        (41_000, 1, False),
        (45_000, 1, False),
    ]
    assert parser.take_events()[-1].tokens_after == 41_000


def test_a_compaction_whose_turn_ends_without_completing_counts_nothing() -> None:
    item = {"type": "contextCompaction", "id": "c1"}
    turn_end = {"method": "turn/completed", "params": {"threadId": "thr_f", "turn": {"id": "t1", "status": "failed"}}}
    lines = [
        _usage_update("thr_f", "t1", 240_000),
        _item("started", "thr_f", "t1", item),
        _usage_update("thr_f", "t1", 262_000),  # the compaction request's usage; then the request fails
        json.dumps(turn_end),
        _usage_update("thr_f", "t2", 243_000),
    ]
    parser, readings = _feed(lines)
    assert [(r.last_usage.total_tokens, r.compaction_count) for _, r in readings] == [(240_000, 0), (243_000, 0)]
    assert [e.type for e in parser.take_events()] == ["compaction_started"]


def test_a_compaction_the_reporter_asked_for_is_manual() -> None:
    parser = CodexAppServerParser()
    parser.feed(_usage_update("thr_m", "t1", 120_000), T0)
    parser.expect_manual("thr_m")
    item = {"type": "contextCompaction", "id": "c1"}
    parser.feed(_item("started", "thr_m", "t2", item), T0)
    parser.feed(_item("completed", "thr_m", "t2", item), T0)
    parser.feed(_item("started", "thr_m", "t3", item | {"id": "c2"}), T0)  # the next one is Codex's own again
    parser.feed(_item("completed", "thr_m", "t3", item | {"id": "c2"}), T0)
    assert [e.trigger_mode for e in parser.take_events()] == [TriggerMode.MANUAL] * 2 + [TriggerMode.REQUEST_START] * 2


def test_a_breakdown_without_total_tokens_counts_input_plus_output() -> None:
    usage = {"inputTokens": 150_000, "cachedInputTokens": 100_000, "outputTokens": 2_000, "reasoningOutputTokens": 500}
    token_usage = {"total": usage, "last": usage, "modelContextWindow": 258_400}
    params = {"threadId": "thr_t", "turnId": "t1", "tokenUsage": token_usage}
    line = json.dumps({"method": "thread/tokenUsage/updated", "params": params})
    parser = CodexAppServerParser()
    reading = parser.feed(line, T0)
    assert reading is not None  # as ccusage does, not skipped
    assert reading.last_usage.total_tokens == 152_000
    assert parser.skipped.counts == {}
