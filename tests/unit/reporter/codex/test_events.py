"""Codex rollouts carry the facts Claude transcripts do: session events, the projection moving within a turn and at a
compaction, and the spec 4.2 work facts of the thread's working directory (the same loop as Claude Code's)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from core.profiles import ProfileSet
from reporter.codex.events import command_outcomes, shell_commands
from reporter.codex.rollouts import RolloutTailer
from reporter.git_facts import FactPatterns, WorkFactTracker
from reporter.reporter import run_rollouts
from reporter.session_events import estimate_tokens
from schemas import MessageRole, TriggerMode, WorkFact
from schemas.session_events import (
    CompactionCompleted,
    CompactionStarted,
    CompactionSummary,
    MessageAdded,
    SessionEvent,
    ToolResultAdded,
    UsageSample,
)
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from streams.projection.fold import fold
from tests.unit.reporter.test_git_facts import T0, _git, _repo
from tests.unit.reporter.test_reporter import IDENTITY, Reporter, _Clock, _Delivery

DATA = Path(__file__).parents[3] / "data" / "codex"
COMPACTION = DATA / "localpush-compaction-excerpt-019c8a59.jsonl"
DESKTOP = DATA / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def _usage_line(record: dict) -> bool:
    return record["payload"].get("type") == "token_count" and record["payload"].get("info") is not None


def _events(tmp_path: Path, source: Path) -> tuple[RolloutTailer, list[SessionEvent]]:
    (tmp_path / "sessions").mkdir(exist_ok=True)
    shutil.copy(source, tmp_path / "sessions" / source.name)
    tailer = RolloutTailer(tmp_path / "sessions", tmp_path / "state.json", collect_events=True)
    tailer.poll()
    return tailer, tailer.take_events()


def test_the_real_compaction_rollout_gives_its_tool_results_usage_and_compaction(tmp_path: Path) -> None:
    tailer, events = _events(tmp_path, COMPACTION)
    records = [json.loads(line) for line in COMPACTION.read_text().splitlines()]
    outputs = [r for r in records if r["payload"].get("type") in ("function_call_output", "custom_tool_call_output")]
    results = [e for e in events if isinstance(e, ToolResultAdded)]
    assert len(results) == len(outputs) == 5
    assert [r.tool_name for r in results] == ["apply_patch"] * 3 + ["exec_command"] * 2  # named by their calls
    assert not any(r.truncated for r in results)
    started, summary, completed = (e for e in events if e.type.startswith("compaction"))
    assert isinstance(started, CompactionStarted)
    assert isinstance(summary, CompactionSummary)
    assert isinstance(completed, CompactionCompleted)
    # the last surface record before the compaction is a tool output: Codex compacted inside its tool loop
    assert started.trigger_mode == summary.trigger_mode == TriggerMode.MID_LOOP
    cut = next(i for i, r in enumerate(records) if r["type"] == "compacted")
    usages = [r["payload"]["info"]["last_token_usage"]["total_tokens"] for r in records[:cut] if _usage_line(r)]
    assert started.tokens_before == completed.tokens_before == [u for u in usages if u <= 258_400][-1]
    replacement = records[cut]["payload"]["replacement_history"]
    texts = "".join(part.get("text", "") for item in replacement for part in item.get("content") or [])
    texts += records[cut]["payload"]["message"]  # what replaced the history: its replacement and the message
    assert summary.summary_token_count == completed.tokens_after == estimate_tokens(texts)
    samples = [e for e in events if isinstance(e, UsageSample)]
    assert [s.input_tokens + s.output_tokens for s in samples][-1] < 100_000  # the post-compaction usage
    assert {s.context_window_tokens for s in samples} == {258_400}
    assert samples[-1].model == "gpt-5.3-codex"  # from the turn_context read before it
    assert len({e.event_id for e in events}) == len(events)
    assert tailer.state_of(tmp_path / "sessions" / COMPACTION.name).cwd == "/redacted/path/59b923df4d"  # type: ignore[union-attr]


def test_events_are_the_same_when_the_file_is_read_again(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, first = _events(tmp_path / "a", COMPACTION)
    _, second = _events(tmp_path / "b", COMPACTION)
    assert first == second
    assert first


def test_the_real_desktop_rollout_gives_messages_calls_and_results(tmp_path: Path) -> None:
    _, events = _events(tmp_path, DESKTOP)
    messages = [e for e in events if isinstance(e, MessageAdded)]
    roles = {m.role for m in messages}
    assert roles == {MessageRole.DEVELOPER, MessageRole.USER, MessageRole.ASSISTANT}
    results = [e for e in events if isinstance(e, ToolResultAdded)]
    assert [r.tool_name for r in results][:2] == [
        "mcp__cloud-associates__search_workflows",
        "[REDACTED_NAME len=43 sha=c186413b]",
    ]
    records = [json.loads(line) for line in DESKTOP.read_text().splitlines()]
    outputs = [r["payload"]["output"] for r in records if r["payload"].get("type") == "function_call_output"]
    assert [r.token_count for r in results] == [estimate_tokens(o) for o in outputs]  # the publisher's redacted text
    assert sum(isinstance(e, UsageSample) for e in events) == 6  # twelve token_counts: a heartbeat, then pairs


def test_the_projection_moves_within_a_turn_and_drops_at_the_compaction(tmp_path: Path) -> None:
    _, events = _events(tmp_path, COMPACTION)
    state, projected = None, []
    for event in events:
        step = fold(state, event, TokenEstimator(), ProfileSet(), ProjectionConfig())
        state = step.state or state
        assert state is not None
        projected.append((event.type, state.projected_tokens))
    first_sample = next(i for i, (t, _) in enumerate(projected) if t == "usage_sample")
    after_sample = [p for t, p in projected[first_sample + 1 :] if t == "tool_result_added"]
    assert after_sample
    assert after_sample[0] > projected[first_sample][1]
    before = next(p for t, p in projected if t == "compaction_started")
    after = next(p for t, p in projected if t == "compaction_summary")
    assert before > 200_000
    assert after < 20_000


def _line(at: datetime, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": at.isoformat(), "type": kind, "payload": payload}) + "\n"


def _exec(at: datetime, call_id: str, command: str) -> str:
    arguments = json.dumps({"cmd": command, "yield_time_ms": 10_000})
    payload = {"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": call_id}
    return _line(at, "response_item", payload)


def test_shell_calls_and_their_outcomes_as_codex_versions_write_them() -> None:
    shell = {
        "type": "function_call",
        "name": "shell",
        "call_id": "c",
        "arguments": '{"command":["bash","-lc","go test ./..."]}',
    }
    assert shell_commands("response_item", shell) == [("c", "go test ./...")]
    local = {"type": "local_shell_call", "call_id": "l", "action": {"type": "exec", "command": ["cargo", "test"]}}
    assert shell_commands("response_item", local) == [("l", "cargo test")]
    redacted = {"type": "function_call", "name": "exec_command", "call_id": "r", "arguments": "[REDACTED_ARGUMENTS]"}
    assert shell_commands("response_item", redacted) == []
    assert command_outcomes("event_msg", {"type": "exec_command_end", "call_id": "c", "exit_code": 1}) == [("c", True)]
    unified = "Chunk ID: 1\nWall time: 0.2 seconds\nProcess exited with code 0\nOutput:\nok\n"
    assert command_outcomes("response_item", {"type": "function_call_output", "call_id": "c", "output": unified}) == [
        ("c", False)
    ]
    old = json.dumps({"output": "boom", "metadata": {"exit_code": 2, "duration_seconds": 0.1}})
    assert command_outcomes("response_item", {"type": "function_call_output", "call_id": "c", "output": old}) == [
        ("c", True)
    ]
    running = "Chunk ID: 2\nWall time: 10.0 seconds\nProcess running with session ID 7\nOutput:\n"
    assert command_outcomes("response_item", {"type": "function_call_output", "call_id": "c", "output": running}) == []


def test_a_truncated_output_and_numbered_windows(tmp_path: Path) -> None:
    thread = "019d0000-0000-7000-8000-00000000000a"
    path = tmp_path / f"rollout-2026-12-01T10-00-00-{thread}.jsonl"
    cut = "line 1\n…1200 tokens truncated…\nlast line\n"
    compacted = {
        "message": "",
        "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "summary " * 50}]}
        ],
    }
    path.write_text(
        _line(T0, "session_meta", {"id": thread, "cwd": "/w", "context_window": 258_400})
        + _exec(T0, "c1", "cat big.log")
        + _line(T0, "response_item", {"type": "function_call_output", "call_id": "c1", "output": cut})
        + _line(T0 + timedelta(seconds=1), "compacted", compacted | {"window_number": 1})
        + _line(T0 + timedelta(seconds=2), "compacted", compacted | {"window_number": 1})
        + _line(T0 + timedelta(seconds=3), "compacted", compacted | {"window_number": 3})
    )
    tailer = RolloutTailer(tmp_path, tmp_path / "state.json", collect_events=True)
    tailer.poll()
    events = tailer.take_events()
    (result,) = [e for e in events if isinstance(e, ToolResultAdded)]
    assert (result.tool_name, result.truncated) == ("exec_command", True)
    assert tailer.state_of(path).compaction_count == 3  # type: ignore[union-attr]
    assert sum(isinstance(e, CompactionStarted) for e in events) == 2  # window 1 once, then window 3


async def _run_a_while(reporter: Reporter, tailer: RolloutTailer) -> None:
    task = asyncio.create_task(run_rollouts(reporter, tailer, poll_seconds=0.05))
    await asyncio.sleep(0.4)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_codex_thread_reports_its_work_facts_like_a_claude_thread(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "app.py").write_text("x = 3\n")
    thread = "019d0000-0000-7000-8000-00000000000b"
    sessions = tmp_path / "sessions" / "2026" / "12" / "01"
    sessions.mkdir(parents=True)
    rollout = sessions / f"rollout-2026-12-01T10-00-00-{thread}.jsonl"
    usage = {"input_tokens": 40_000, "cached_input_tokens": 30_000, "output_tokens": 500, "total_tokens": 40_500}
    at = T0 + timedelta(minutes=1)
    rollout.write_text(
        _line(at, "session_meta", {"id": thread, "cwd": "/elsewhere"})
        + _line(at, "turn_context", {"cwd": str(repo), "model": "gpt-5.3-codex"})
        + _line(
            at,
            "event_msg",
            {"type": "token_count", "info": {"last_token_usage": usage, "model_context_window": 258_400}},
        )
        + _exec(at, "call_t", "pytest -q")
        + _line(at, "event_msg", {"type": "exec_command_end", "call_id": "call_t", "exit_code": 0})
        + _exec(at, "call_f", "esptool.py --port /dev/ttyUSB0 write_flash 0x0 fw.bin")
        + _line(
            at,
            "response_item",
            {"type": "function_call_output", "call_id": "call_f", "output": "Process running with session ID 3\n"},
        )
    )
    clock, delivery = _Clock(), _Delivery()
    reporter = Reporter(IDENTITY, delivery, clock=clock)
    tailer = RolloutTailer(tmp_path / "sessions", tmp_path / "state.json", True, WorkFactTracker(FactPatterns()))
    await _run_a_while(reporter, tailer)
    facts = {(e.fact, e.active, tuple(e.files), e.detail) for e in delivery.events if e.type == "work_fact_changed"}
    assert facts == {
        (WorkFact.UNCOMMITTED_PATCH, True, ("app.py",), ""),
        (WorkFact.UNRECORDED_TEST_RESULTS, True, (), "pytest -q: passed"),
        (WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP, True, (), "esptool.py --port /dev/ttyUSB0 write_flash 0x0 fw.bin"),
    }
    assert delivery.snapshots[-1].must_finish_before_compaction is True
    assert delivery.snapshots[-1].thread_id == thread
    assert {e.type for e in delivery.events} >= {"usage_sample", "message_added", "work_fact_changed"}

    _git(repo, "commit", "-qam", "x is 3", at=T0 + timedelta(minutes=2))
    with rollout.open("a") as handle:
        handle.write(
            _line(
                T0 + timedelta(minutes=3),
                "event_msg",
                {"type": "exec_command_end", "call_id": "call_f", "exit_code": 0},
            )
        )
    clock.now += timedelta(seconds=5)
    await _run_a_while(reporter, tailer)
    cleared = {(e.fact, e.active) for e in delivery.events if e.type == "work_fact_changed"} - {
        (f, a) for f, a, _, _ in facts
    }
    assert cleared == {
        (WorkFact.UNCOMMITTED_PATCH, False),
        (WorkFact.UNRECORDED_TEST_RESULTS, False),
        (WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP, False),
    }
    assert delivery.snapshots[-1].must_finish_before_compaction is False


async def test_a_compaction_the_tailer_says_is_not_said_again_by_the_reporter(tmp_path: Path) -> None:
    shutil.copy(COMPACTION, tmp_path / COMPACTION.name)
    delivery = _Delivery()
    reporter = Reporter(IDENTITY, delivery, clock=_Clock())
    await _run_a_while(reporter, RolloutTailer(tmp_path, tmp_path / "state.json", collect_events=True))
    assert [e.event_id for e in delivery.events if e.type == "compaction_completed"] == [
        e.event_id for e in delivery.events if e.type == "compaction_completed" and e.event_id.startswith("cx-")
    ]
    assert sum(e.type == "compaction_completed" for e in delivery.events) == 1


async def test_events_go_out_stamped_and_a_refused_one_is_set_aside(tmp_path: Path) -> None:
    from reporter.delivery import RejectedRecord
    from reporter.delivery.spool import Spool
    from reporter.delivery.spooled import SpooledDelivery

    class Refusing(_Delivery):
        async def send_event(self, event: SessionEvent) -> None:
            if isinstance(event, ToolResultAdded):
                raise RejectedRecord("422: refused")
            await super().send_event(event)

    shutil.copy(COMPACTION, tmp_path / COMPACTION.name)
    inner = Refusing()
    spooled = SpooledDelivery(Spool(tmp_path / "spool"), inner)
    await spooled.start()
    await _run_a_while(Reporter(IDENTITY, spooled, clock=_Clock()), RolloutTailer(tmp_path, tmp_path / "s.json", True))
    await spooled.close()
    assert inner.events
    assert {(e.project_id, e.node_id, e.worker_id) for e in inner.events} == {
        (IDENTITY.project_id, IDENTITY.node_id, IDENTITY.worker_id)
    }
    set_aside = spooled.rejected_path.read_text().splitlines()
    assert len(set_aside) == 5  # the five tool results, with the reason, not lost
    assert json.loads(set_aside[0])["reason"] == "422: refused"


def test_the_real_apply_patch_calls_are_edits_the_work_facts_look_at(tmp_path: Path) -> None:
    class Counting(WorkFactTracker):
        edits = 0

        def observe_edit(self, thread_id: str) -> None:
            self.edits += 1
            super().observe_edit(thread_id)

    shutil.copy(COMPACTION, tmp_path / COMPACTION.name)
    tracker = Counting()
    RolloutTailer(tmp_path, tmp_path / "s.json", True, tracker).poll()
    assert tracker.edits == 3  # the excerpt's three apply_patch custom_tool_calls


class _Requests(_Delivery):
    """Each session-event request's events; the first `events_down` requests fail."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[list[SessionEvent]] = []

    async def send_events(self, events: Sequence[SessionEvent]) -> None:
        self.requests.append(list(events))
        await super().send_events(events)


async def test_a_rounds_events_of_both_tools_go_in_one_request_and_a_failed_one_keeps_them(tmp_path: Path) -> None:
    from reporter.claude_code.transcripts import TranscriptTailer
    from tests.unit.reporter.claude_code.test_transcripts import MANUAL, _project

    (tmp_path / "codex").mkdir()
    shutil.copy(COMPACTION, tmp_path / "codex" / COMPACTION.name)
    codex = RolloutTailer(tmp_path / "codex", tmp_path / "codex.json", collect_events=True)
    claude = TranscriptTailer(_project(tmp_path, MANUAL, "ae4a77f8"), tmp_path / "claude.json", collect_events=True)
    delivery = _Requests()
    delivery.events_down = 1
    task = asyncio.create_task(run_rollouts(Reporter(IDENTITY, delivery, clock=_Clock()), [codex, claude], 0.05))
    await asyncio.sleep(0.4)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    failed, sent, *later = delivery.requests
    assert [event.event_id for event in sent] == [event.event_id for event in failed]  # kept, in order
    assert {event.thread_id for event in sent} == {
        "019c8a59-e9dd-71f0-9ae3-4079fe9726a9",
        "ae4a77f8-aedd-4bc1-888f-c94edc91af04",
    }
    assert [event.event_id for event in delivery.events] == [event.event_id for event in sent]
    assert later == []  # nothing new: no request
