"""Codex rollouts as Codex really writes them: real files (tests/data/codex) and the newer shapes of REFERENCES.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.profiles import CODEX_VERSIONS, DEFAULT_CODEX_VERSION
from reporter.codex.rollouts import RolloutTailer
from reporter.readings import Identity, to_snapshot

DATA = Path(__file__).parents[3] / "data" / "codex"
WHOLE = DATA / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
COMPACTION = DATA / "localpush-compaction-excerpt-019c8a59.jsonl"
IDENTITY = Identity(node_id="node-1", worker_id="worker-1", project_id="proj-1")


def _tail(tmp_path: Path, *files: Path) -> RolloutTailer:
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    for file in files:
        shutil.copy(file, sessions / file.name)
    return RolloutTailer(sessions, tmp_path / "state.json")


def test_heartbeats_and_repeated_usage_records_make_no_readings(tmp_path: Path) -> None:
    tailer = _tail(tmp_path, WHOLE)
    readings = tailer.poll()
    # 12 token_count lines: one heartbeat, and five usages each written twice.
    assert [r.last_usage.total_tokens for r in readings] == [42_976, 44_314, 49_214, 49_505, 49_760, 63_727]
    assert {(r.context_window, r.model) for r in readings} == {(258_400, "gpt-5.3-codex")}  # from task_started
    assert tailer.skipped.counts == {}


def test_a_compaction_announced_twice_counts_once_and_its_over_window_usage_is_no_occupancy(tmp_path: Path) -> None:
    tailer = _tail(tmp_path, COMPACTION)
    readings = tailer.poll()
    assert [(r.last_usage.total_tokens, r.compaction_count) for r in readings] == [
        (208_415, 0),
        (208_959, 0),
        (209_879, 0),
        (212_134, 0),
        (212_134, 1),
        (48_687, 1),
    ]
    assert tailer.skipped.counts == {"usage_above_window": 1}  # 940,499 of a 258,400 window, then its repeat


def test_snapshots_carry_the_tool_the_model_and_the_percent_codex_shows(tmp_path: Path) -> None:
    reading = _tail(tmp_path, WHOLE).poll()[-1]
    snapshot = to_snapshot(reading, IDENTITY, DEFAULT_CODEX_VERSION)
    assert (snapshot.agent_tool, snapshot.model) == ("codex", "gpt-5.3-codex")
    shown = DEFAULT_CODEX_VERSION.displayed_pct(reading.last_usage, 258_400)
    assert snapshot.shown_remaining_pct == shown == 79
    assert snapshot.context_budget_remaining_pct != snapshot.shown_remaining_pct


def _line(kind: str, payload: dict, second: int) -> str:
    return json.dumps({"timestamp": f"2026-09-01T10:00:{second:02d}.000Z", "type": kind, "payload": payload}) + "\n"


META = {"id": "019d0000-0000-7000-8000-000000000001", "cwd": "/w"}


def test_newer_shapes_window_usage_records_and_compaction_items(tmp_path: Path) -> None:
    usage = {"input_tokens": 30_000, "cached_input_tokens": 20_000, "cache_write_input_tokens": 0, "output_tokens": 500}
    lines = [
        _line("session_meta", META | {"context_window": {"model_context_window": 200_000}}, 0),
        _line("token_usage_record", {"usage": usage, "thread_token_usage": {"total_tokens": 99_999}}, 1),
        _line("response_item", {"type": "compaction_summary", "encrypted_content": "x"}, 2),
        _line("event_msg", {"type": "context_compacted"}, 3),
        _line("token_usage_record", {"usage": usage | {"input_tokens": 9_000, "total_tokens": 9_400}}, 4),
        _line("event_msg", {"type": "context_compacted"}, 5),
        _line("future_record_type", {}, 6),
    ]
    path = tmp_path / "sessions" / "rollout-2026-09-01T10-00-00-019d0000-0000-7000-8000-000000000001.jsonl"
    path.parent.mkdir()
    path.write_text("".join(lines))
    tailer = RolloutTailer(path.parent, tmp_path / "state.json")
    readings = tailer.poll()
    assert [(r.last_usage.total_tokens, r.compaction_count, r.context_window) for r in readings] == [
        (30_500, 0, 200_000),  # no total: input + output
        (30_500, 1, 200_000),  # the summary item; the event that follows is the same compaction
        (9_400, 1, 200_000),
        (9_400, 2, 200_000),  # an event alone is a compaction of its own
    ]
    assert tailer.skipped.counts == {"unknown_type": 1}


def test_session_meta_window_as_an_int(tmp_path: Path) -> None:
    path = tmp_path / "s" / "rollout-x.jsonl"
    path.parent.mkdir()
    usage = {"input_tokens": 1_000, "output_tokens": 10, "total_tokens": 1_010}
    path.write_text(
        _line("session_meta", META | {"context_window": 128_000}, 0) + _line("token_usage_record", {"usage": usage}, 1)
    )
    assert [r.context_window for r in RolloutTailer(path.parent, tmp_path / "st.json").poll()] == [128_000]


def test_a_real_token_count_with_cache_write_tokens(tmp_path: Path) -> None:
    """haakofli/usage-tracker's published line (a newer Codex): `cache_write_input_tokens` beside the others."""
    source = Path(__file__).parents[3] / "data" / "codex" / "usage-tracker-cache-write.jsonl"
    thread = "019d0000-0000-7000-8000-0000000000cc"
    path = tmp_path / f"rollout-2026-09-11T10-51-00-{thread}.jsonl"
    path.write_bytes(source.read_bytes())
    (reading,) = RolloutTailer(tmp_path, tmp_path / "state.json").poll()
    assert (reading.thread_id, reading.context_window) == (thread, 258_400)
    usage = reading.last_usage
    assert (usage.total_tokens, usage.cached_input_tokens, usage.cache_write_input_tokens) == (15_725, 12_160, 0)


def _codex_0_169_usage(total: int, reasoning: int, includes_reasoning: bool) -> list[dict]:
    """One usage as Codex 0.169.0 writes it (the shapes of a rollout it wrote here against the scripted model
    server: a `token_usage_record`, then the same usage as a `token_count` whose `info` says
    `last_usage_includes_reasoning`)."""
    usage = {
        "input_tokens": total - 2_000 - reasoning,
        "cached_input_tokens": 0,
        "cache_write_input_tokens": 0,
        "output_tokens": 2_000 + reasoning,
        "reasoning_output_tokens": reasoning,
        "total_tokens": total,
    }
    thread = "01a241e8-7d22-71c3-9b82-dbcc948e7f0a"
    record = {"thread_id": thread, "turn_id": "t1", "session_id": thread, "usage": usage, "turn_token_usage": usage}
    info = {
        "total_token_usage": usage,
        "last_token_usage": usage,
        "last_usage_includes_reasoning": includes_reasoning,
        "model_context_window": 258_400,
    }
    at = "2026-12-04T16:34:45.286Z"
    return [
        {"timestamp": at, "type": "session_meta", "payload": {"id": thread, "cli_version": "0.169.0", "cwd": "/w"}},
        {"timestamp": at, "type": "turn_context", "payload": {"cwd": "/w", "model": "gpt-5.5"}},
        {"timestamp": at, "type": "token_usage_record", "payload": record},
        {"timestamp": at, "type": "event_msg", "payload": {"type": "token_count", "info": info, "rate_limits": None}},
    ]


def test_codex_0_169_says_whether_its_percent_counts_reasoning_and_that_decides(tmp_path: Path) -> None:
    """Issue 35: /status said 68% left where the reporter said 81%: 32,000 reasoning tokens Codex counted."""
    for includes, shown in ((True, 68.0), (False, 81.0)):
        folder = tmp_path / str(includes)
        folder.mkdir()
        rollout = folder / "rollout-2026-12-04T16-34-45-01a241e8-7d22-71c3-9b82-dbcc948e7f0a.jsonl"
        rollout.write_text("".join(json.dumps(line) + "\n" for line in _codex_0_169_usage(90_848, 32_000, includes)))
        readings = RolloutTailer(folder, folder / "state.json").poll()
        assert readings[-1].last_usage.includes_reasoning is includes
        snapshot = to_snapshot(readings[-1], IDENTITY, CODEX_VERSIONS["reference"])  # the flag overrides the profile
        assert snapshot.shown_remaining_pct == shown
