from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from core.profiles import DEFAULT_CODEX_VERSION
from reporter.codex.rollouts import RolloutTailer
from reporter.readings import Identity, Reading, to_snapshot
from schemas import SourceKind
from schemas.session_events import UsageSample
from tests.unit.reporter.conftest import ROLLOUT_FILE, ROLLOUT_THREAD

IDENTITY = Identity(node_id="node-1", worker_id="worker-1", project_id="proj-1")
EXPECTED = [(81.0, 0), (11.0, 0), (11.0, 1), (93.0, 1), (64.0, 1)]
"""The fixture grows, compacts (the `compacted` record, counted once), recomputes, grows again (reasoning tokens
counted, as current Codex versions count them)."""


def _summary(readings) -> list[tuple[float, int]]:
    return [(_shown(r), r.compaction_count) for r in readings]


def test_a_rollout_gives_the_expected_readings(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    tailer = RolloutTailer(tmp_path / "sessions", tmp_path / "state.json")
    readings = tailer.poll()
    assert _summary(readings) == EXPECTED
    assert {(r.thread_id, r.source_kind, r.context_window) for r in readings} == {
        (ROLLOUT_THREAD, SourceKind.CODEX_SDK, 258_400)
    }
    assert readings[0].observed_at == datetime(2026, 3, 25, 7, 0, 5, tzinfo=UTC)
    assert readings[2].last_compaction_at == datetime(2026, 3, 25, 7, 20, 30, tzinfo=UTC)
    assert readings[1].last_usage.total_tokens == 232_000  # the line's cumulative total is 442,000
    assert tailer.skipped.counts == {"unknown_type": 1}


def test_positions_are_line_end_offsets(tmp_path: Path) -> None:
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    readings = RolloutTailer(tmp_path, tmp_path / "s.json").poll()
    data = ROLLOUT_FILE.read_bytes()
    ends = {i + 1 for i, byte in enumerate(data) if byte == ord("\n")}
    assert all(r.position in ends for r in readings)
    assert [r.position for r in readings] == sorted({r.position for r in readings})


def test_resume_after_restart_reads_every_line_once_and_waits_for_a_partial_line(tmp_path: Path) -> None:
    data = ROLLOUT_FILE.read_bytes()
    lines = data.splitlines(keepends=True)
    cut = sum(len(line) for line in lines[:6]) + 40  # 40 bytes into the 7th line (the `compacted` record)
    sessions, state = tmp_path / "sessions", tmp_path / "var" / "state.json"
    sessions.mkdir()
    path = sessions / ROLLOUT_FILE.name
    path.write_bytes(data[:cut])

    first = RolloutTailer(sessions, state)
    seen = first.poll()
    first.commit()
    assert first.poll() == []  # the partial line is not consumed
    # A restarted reporter: a new tailer from the saved state; the writer finishes the line and appends the rest.
    with path.open("ab") as handle:
        handle.write(data[cut:])
    second = RolloutTailer(sessions, state)
    seen += second.poll()
    assert _summary(seen) == EXPECTED
    assert len({r.position for r in seen}) == len(seen)


def test_an_uncommitted_poll_is_read_again_with_the_same_positions(tmp_path: Path) -> None:
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    state = tmp_path / "state.json"
    crashed = RolloutTailer(tmp_path, state).poll()  # no commit: the reporter died before saving
    assert RolloutTailer(tmp_path, state).poll() == crashed


def test_restored_reading_is_the_last_one_saved(tmp_path: Path) -> None:
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    state = tmp_path / "state.json"
    tailer = RolloutTailer(tmp_path, state)
    last = tailer.poll()[-1]
    tailer.commit()
    assert RolloutTailer(tmp_path, state).restored() == [last]


def test_a_new_file_and_a_replaced_file_are_picked_up(tmp_path: Path) -> None:
    path = tmp_path / ROLLOUT_FILE.name
    path.write_bytes(ROLLOUT_FILE.read_bytes())
    tailer = RolloutTailer(tmp_path, tmp_path / "state.json")
    tailer.poll()
    usage = {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0}
    line = {
        "timestamp": "2026-03-25T08:00:00Z",
        "type": "event_msg",
        "payload": {
            "type": "token_count",
            "info": {
                "total_token_usage": {**usage, "total_tokens": 40_000},
                "last_token_usage": {**usage, "total_tokens": 40_000},
                "model_context_window": 128_000,
            },
        },
    }
    other = tmp_path / "2026" / "03" / "25" / "rollout-2026-03-25T16-00-00-0199a213-0000-7000-8000-000000000001.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps(line) + "\n")
    replacement = tmp_path / "replacement"
    replacement.write_text(json.dumps(line) + "\n")
    replacement.replace(path)  # a new inode, shorter than the saved offset
    readings = tailer.poll()
    assert sorted(r.thread_id for r in readings) == sorted([ROLLOUT_THREAD, "0199a213-0000-7000-8000-000000000001"])
    assert all(r.context_window == 128_000 for r in readings)


def _shown(reading: Reading) -> float:
    """The percent Codex displays for the reading: it must equal Codex's own."""
    return float(DEFAULT_CODEX_VERSION.displayed_pct(reading.last_usage, reading.context_window))


def test_the_compaction_reading_says_its_usage_is_from_before_the_compaction(tmp_path: Path) -> None:
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    readings = RolloutTailer(tmp_path, tmp_path / "state.json").poll()
    # the `compacted` record repeats the last usage, of before it; the next token_count is Codex's recomputed one
    assert [(_shown(r), r.compaction_count, r.usage_stale) for r in readings] == [
        (81.0, 0, False),
        (11.0, 0, False),
        (11.0, 1, True),
        (93.0, 1, False),
        (64.0, 1, False),
    ]


def test_a_rollouts_samples_and_snapshots_say_codexs_version_and_what_its_budget_measured(tmp_path: Path) -> None:
    """The fleet learns Codex's point per `cli_version` family, and the engine measures a snapshot that says its
    tokens and window against it."""
    (tmp_path / ROLLOUT_FILE.name).write_bytes(ROLLOUT_FILE.read_bytes())
    tailer = RolloutTailer(tmp_path, tmp_path / "state.json", collect_events=True)
    readings = tailer.poll()
    samples = [e for e in tailer.take_events() if isinstance(e, UsageSample)]
    assert samples
    assert {s.tool_version for s in samples} == {"0.46.0"}
    snapshot = to_snapshot(readings[1], IDENTITY, DEFAULT_CODEX_VERSION)
    assert (snapshot.context_tokens, snapshot.context_window_tokens, snapshot.tool_version) == (
        232_000,
        258_400,
        "0.46.0",
    )
    assert snapshot.context_budget_remaining_pct == DEFAULT_CODEX_VERSION.remaining_pct(232_000, 258_400)
