from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.fleet_points import measured, no_points, point_key
from core.profiles import DEFAULT_CODEX_VERSION, ClaudeCodeProfile
from reporter.cadence import Cadence
from reporter.claude_code.transcripts import TranscriptTailer
from reporter.readings import Identity, reading_level, to_snapshot
from schemas import SourceKind, TriggerMode
from schemas.compaction_points import CompactionPoint
from schemas.session_events import ToolResultAdded, UsageSample
from schemas.state import SourceMark
from tests.unit.reporter.conftest import FIXTURES

DATA = Path(__file__).parents[3] / "data" / "claude_code"
AUTO = DATA / "slopometry-compaction-excerpt.jsonl"
AUTO_SESSION = "0f112eb4-a676-476d-8986-d6c78693cd5b"
MANUAL = DATA / "spotter-manual-compaction-excerpt.jsonl"
IDENTITY = Identity(node_id="node-1", worker_id="worker-1", project_id="proj-1")
DEFAULT_POINT = 177_000
"""Claude Code 2.1.328 at a 200,000 window (REFERENCES.md)."""
MODEL = "claude-opus-4-5-20251101"


def _project(tmp_path: Path, source: Path, session: str) -> Path:
    projects = tmp_path / "projects"
    (projects / "-Users-someone-code").mkdir(parents=True, exist_ok=True)
    shutil.copy(source, projects / "-Users-someone-code" / f"{session}.jsonl")
    return projects


def test_each_reply_counts_once_and_usage_before_the_boundary_is_stale_after_it(tmp_path: Path) -> None:
    tailer = TranscriptTailer(_project(tmp_path, AUTO, AUTO_SESSION), tmp_path / "state.json")
    readings = tailer.poll()
    # Six replies (each written as two records, whose output count grows), the boundary, then two replies after it.
    # The occupancy is the prompt plus the reply's output so far: Claude Code's own count (its preTokens below).
    assert [(r.last_usage.input_tokens, r.last_usage.total_tokens) for r in readings] == [
        (150_305, 151_065),
        (151_622, 151_626),
        (152_099, 152_100),
        (152_785, 152_793),
        (152_785, 153_358),
        (153_827, 153_832),
        (154_980, 154_981),
        (154_980, 155_317),
        (154_980, 155_317),  # the boundary: the compaction counted, the usage of before it stale
        (34_667, 34_670),
        (34_667, 34_935),
        (35_316, 35_317),
        (35_316, 35_505),
    ]
    assert [r.compaction_count for r in readings] == [0] * 8 + [1] * 5
    assert [r.usage_stale for r in readings] == [False] * 8 + [True] + [False] * 4
    assert readings[-1].last_compaction_at == datetime(2025, 12, 12, 14, 31, 13, 441000, tzinfo=UTC)
    assert {(r.thread_id, r.source_kind, r.agent_tool, r.model) for r in readings} == {
        (AUTO_SESSION, SourceKind.WORKER_ESTIMATOR, "claude-code", MODEL)
    }
    assert tailer.skipped.counts == {}  # api_error and user records are skipped quietly


def test_the_occupancy_before_an_automatic_compaction_is_its_pre_tokens(tmp_path: Path) -> None:
    """The real excerpt: the last reply before the boundary (154,980 prompt + 337 output) is exactly its preTokens, the
    count Claude Code compared with its point; the prompt alone falls 337 short."""
    tailer = TranscriptTailer(_project(tmp_path, AUTO, AUTO_SESSION), tmp_path / "state.json", collect_events=True)
    before = [r for r in tailer.poll() if r.compaction_count == 0][-1]
    (started,) = [e for e in tailer.take_events() if e.type == "compaction_started"]
    assert before.last_usage.total_tokens == started.tokens_before == 155_317


def test_the_profile_learns_the_point_of_an_automatic_compaction(tmp_path: Path) -> None:
    tailer = TranscriptTailer(_project(tmp_path, AUTO, AUTO_SESSION), tmp_path / "state.json")
    readings = tailer.poll()
    assert readings[0].budget_pct == (DEFAULT_POINT - 151_065) / DEFAULT_POINT * 100
    assert tailer.profile.compaction_point(200_000, MODEL) == 155_317
    assert tailer.profile.compaction_point(200_000, "claude-sonnet-4-5") == DEFAULT_POINT  # another model's point
    assert readings[9].budget_pct == (155_317 - 34_670) / 155_317 * 100
    assert readings[9].shown_pct == (200_000 - 34_667) / 200_000 * 100
    tailer.commit()
    again = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")
    assert again.profile.compaction_point(200_000, MODEL) == 155_317


def test_a_manual_compaction_counts_but_teaches_nothing(tmp_path: Path) -> None:
    tailer = TranscriptTailer(_project(tmp_path, MANUAL, "ae4a77f8"), tmp_path / "state.json")
    readings = tailer.poll()
    assert [(r.last_usage.total_tokens, r.compaction_count, r.usage_stale) for r in readings] == [
        (141_788, 0, False),
        (141_788, 1, True),
        (45_272, 1, False),
    ]
    assert tailer.profile.learned.samples == {}
    assert tailer.skipped.counts == {}  # progress, file-history-snapshot, stop_hook_summary, turn_duration


def test_sidechain_records_and_subagent_files_are_not_the_thread(tmp_path: Path) -> None:
    projects = _project(tmp_path, DATA / "spotter-subagent-aac57f5.jsonl", "sidechain-only")
    subagents = projects / "-Users-someone-code" / AUTO_SESSION / "subagents"
    subagents.mkdir(parents=True)
    shutil.copy(DATA / "spotter-subagent-aac57f5.jsonl", subagents / "agent-aac57f5.jsonl")
    tailer = TranscriptTailer(projects, tmp_path / "state.json")
    assert tailer.poll() == []
    assert [Path(k).name for k in tailer._files] == ["sidechain-only.jsonl"]


def test_resume_reads_every_line_once_and_waits_for_a_partial_line(tmp_path: Path) -> None:
    data = AUTO.read_bytes()
    cut = data.index(b'"compact_boundary"')
    projects = tmp_path / "projects" / "p"
    projects.mkdir(parents=True)
    path = projects / f"{AUTO_SESSION}.jsonl"
    path.write_bytes(data[:cut])
    first = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")
    seen = first.poll()
    first.commit()
    with path.open("ab") as handle:
        handle.write(data[cut:])
    again = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")
    seen += again.poll()
    assert [r.last_usage.total_tokens for r in seen][-6:] == [155_317, 155_317, 34_670, 34_935, 35_317, 35_505]
    assert [r.usage_stale for r in seen][-6:] == [False, True, False, False, False, False]
    assert len(seen) == 13
    assert [r.position for r in again.restored()] == [seen[-1].position]


def test_a_claude_reading_makes_a_snapshot_with_its_own_profile_and_tool() -> None:
    tailer_profile = ClaudeCodeProfile()
    assert tailer_profile.compaction_point(200_000) == DEFAULT_POINT
    assert ClaudeCodeProfile(max_output_tokens=8_000).compaction_point(200_000) == 200_000 - 8_000 - 13_000
    assert tailer_profile.compaction_point(1_000_000) == 1_000_000 - 10_000 - 13_000
    assert ClaudeCodeProfile().window("claude-sonnet-4-5[1m]") == 1_000_000


def test_snapshot_carries_tool_model_and_shown_percent(tmp_path: Path) -> None:
    reading = TranscriptTailer(_project(tmp_path, AUTO, AUTO_SESSION), tmp_path / "s.json").poll()[0]
    snapshot = to_snapshot(reading, IDENTITY, DEFAULT_CODEX_VERSION)
    assert snapshot.source_kind is SourceKind.WORKER_ESTIMATOR
    assert (snapshot.agent_tool, snapshot.model) == ("claude-code", "claude-opus-4-5-20251101")
    assert snapshot.context_budget_remaining_pct == reading.budget_pct
    assert snapshot.shown_remaining_pct == (200_000 - 150_305) / 200_000 * 100


async def test_the_reporter_sends_a_claude_thread_with_its_compaction(tmp_path: Path) -> None:
    from tests.unit.reporter.test_reporter import IDENTITY as REPORTER_IDENTITY
    from tests.unit.reporter.test_reporter import Reporter, _Clock, _Delivery

    tailer = TranscriptTailer(_project(tmp_path, AUTO, AUTO_SESSION), tmp_path / "state.json")
    delivery = _Delivery()
    reporter = Reporter(REPORTER_IDENTITY, delivery, clock=_Clock())
    for reading in tailer.poll():
        reporter.observe(reading)
    await reporter.flush(final=True)
    last = delivery.snapshots[-1]
    assert (last.thread_id, last.compaction_count, last.agent_tool) == (AUTO_SESSION, 1, "claude-code")
    assert last.context_budget_remaining_pct == (155_317 - 35_505) / 155_317 * 100


def _events(tmp_path: Path, source: Path, session: str) -> list:
    tailer = TranscriptTailer(_project(tmp_path, source, session), tmp_path / "state.json", collect_events=True)
    tailer.poll()
    return tailer.take_events()


def test_transcript_events_carry_usage_surface_and_an_automatic_compaction_inside_a_tool_loop(tmp_path: Path) -> None:
    events = _events(tmp_path, AUTO, AUTO_SESSION)
    assert [e.input_tokens for e in events if isinstance(e, UsageSample)] == [
        150_305,
        151_622,
        152_099,
        152_785,
        153_827,
        154_980,
        34_667,
        35_316,
    ]
    compaction = [e for e in events if e.type.startswith("compaction")]
    assert [(e.type, e.trigger_mode) for e in compaction] == [
        ("compaction_started", TriggerMode.MID_LOOP),  # the last record before the boundary is a tool result
        ("compaction_summary", TriggerMode.MID_LOOP),
        ("compaction_completed", TriggerMode.MID_LOOP),
    ]
    assert compaction[0].tokens_before == compaction[2].tokens_before == 155_317
    tools = [e for e in events if isinstance(e, ToolResultAdded)]
    assert {e.tool_name for e in tools} >= {"Read", "Edit"}
    assert not any(e.truncated for e in tools)
    assert len({e.event_id for e in events}) == len(events)
    assert _events(tmp_path / "again", AUTO, AUTO_SESSION) == events  # ids and times come from the records


def test_a_manual_compaction_is_manual(tmp_path: Path) -> None:
    events = _events(tmp_path, MANUAL, "ae4a77f8")
    assert {e.trigger_mode for e in events if e.type.startswith("compaction")} == {TriggerMode.MANUAL}


def test_a_tool_result_the_tool_cut_short_is_truncated(tmp_path: Path) -> None:
    lines = [
        {
            "type": "assistant",
            "uuid": "a1",
            "sessionId": "s1",
            "timestamp": "2026-01-01T10:00:00Z",
            "requestId": "r1",
            "message": {
                "id": "m1",
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 10, "output_tokens": 5},
                "content": [{"type": "tool_use", "id": "tu1", "name": "Glob", "input": {"pattern": "**"}}],
            },
        },
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": "s1",
            "timestamp": "2026-01-01T10:00:01Z",
            "toolUseResult": {"filenames": ["a"], "numFiles": 100, "truncated": True},
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a\nb"}]},
        },
    ]
    path = tmp_path / "p" / "s1.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tailer = TranscriptTailer(tmp_path, tmp_path / "st.json", collect_events=True)
    tailer.poll()
    (result,) = [e for e in tailer.take_events() if isinstance(e, ToolResultAdded)]
    assert (result.tool_name, result.truncated) == ("Glob", True)


def test_the_projection_drops_at_the_real_compaction(tmp_path: Path) -> None:
    from core.profiles import ProfileSet
    from streams.projection.config import ProjectionConfig
    from streams.projection.estimator import TokenEstimator
    from streams.projection.fold import fold

    state, projected = None, []
    for event in _events(tmp_path, AUTO, AUTO_SESSION):
        step = fold(state, event, TokenEstimator(), ProfileSet(), ProjectionConfig())
        state = step.state or state
        projected.append((event.type, state.projected_tokens))
    before = next(p for t, p in projected if t == "compaction_started")
    after = next(p for t, p in projected if t == "compaction_summary")
    assert before > 150_000
    assert after < 40_000


async def test_the_rollouts_loop_sends_a_transcripts_events_and_snapshots(tmp_path: Path) -> None:
    import asyncio
    import contextlib

    from reporter.reporter import run_rollouts
    from tests.unit.reporter.test_reporter import IDENTITY as REPORTER_IDENTITY
    from tests.unit.reporter.test_reporter import Reporter, _Delivery

    projects = _project(tmp_path, MANUAL, "ae4a77f8")
    tailer = TranscriptTailer(projects, tmp_path / "state.json", collect_events=True)
    delivery = _Delivery()
    task = asyncio.create_task(run_rollouts(Reporter(REPORTER_IDENTITY, delivery), tailer, poll_seconds=0.05))
    await asyncio.sleep(0.3)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert [e.type for e in delivery.events if e.type.startswith("compaction")] == [
        "compaction_started",
        "compaction_summary",
        "compaction_completed",
    ]
    assert delivery.snapshots[0].thread_id == "ae4a77f8-aedd-4bc1-888f-c94edc91af04"  # the records name it
    assert (tmp_path / "state.json").exists()


REAL_2_1_328 = FIXTURES / "claude-2.1.328-auto-compaction-excerpt.jsonl"
"""Claude Code 2.1.328 run here against the project's scripted model server (tests/realtools' harness) with
`CLAUDE_CODE_AUTO_COMPACT_WINDOW=200000`: lines 64-83 and 96-97 of its transcript, whole and unedited (the large
`attachment` / `api-request-*` lines between were left out). It compacted automatically at preTokens 180,270 and wrote
the boundary (16:37:50.393) after the summary (16:37:50.359), with `durationMs: 33`."""
REAL_SESSION = "f216875b-3e19-4a8b-a11b-4a17bc1d2140"


def test_a_2_1_328_compaction_starts_before_it_completes(tmp_path: Path) -> None:
    events = _events(tmp_path, REAL_2_1_328, REAL_SESSION)
    compaction = {e.type: e for e in events if e.type.startswith("compaction")}
    assert set(compaction) == {"compaction_started", "compaction_summary", "compaction_completed"}
    started, completed = compaction["compaction_started"], compaction["compaction_completed"]
    assert started.occurred_at == datetime(2026, 12, 4, 16, 37, 50, 360000, tzinfo=UTC)  # boundary - durationMs
    assert started.occurred_at <= completed.occurred_at
    assert completed.tokens_before == 180_270


def test_a_2_1_328_threshold_compaction_teaches_its_model_and_window(tmp_path: Path) -> None:
    tailer = TranscriptTailer(_project(tmp_path, REAL_2_1_328, REAL_SESSION), tmp_path / "state.json")
    readings = tailer.poll()
    before = [r for r in readings if r.compaction_count == 0]
    assert [r.last_usage.total_tokens for r in before] == [148_200, 164_200, 180_200]  # prompt + the 200 output
    assert before[1].budget_pct == (DEFAULT_POINT - 164_200) / DEFAULT_POINT * 100
    assert tailer.profile.compaction_point(200_000, "claude-sonnet-4-5") == 180_270


def test_after_a_2_1_328_compaction_the_reading_of_before_is_not_sent_again(tmp_path: Path) -> None:
    """The last reading before the compaction was critical: re-sent at the level's interval after the compaction, it
    presented the occupancy the compaction had just emptied as current, until the next reply."""
    lines = REAL_2_1_328.read_bytes().splitlines(keepends=True)
    assert b'"isCompactSummary":true' in lines[19]
    assert b'"type":"assistant"' in lines[20]
    projects = tmp_path / "projects" / "p"
    projects.mkdir(parents=True)
    path = projects / f"{REAL_SESSION}.jsonl"
    path.write_bytes(b"".join(lines[:20]))  # through the boundary and the summary: no reply since
    tailer = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json", collect_events=True)
    cadence, now = Cadence(), datetime(2026, 12, 4, 16, 37, 51, tzinfo=UTC)
    readings = tailer.poll()
    for reading in readings:
        cadence.observe(reading, reading_level(reading, DEFAULT_CODEX_VERSION), now)
    assert (readings[-1].compaction_count, readings[-1].usage_stale, readings[-1].events_derived) == (1, True, True)
    assert cadence.due(now) == []
    assert cadence.due(now + timedelta(minutes=1)) == []  # no re-send of 180,200 tokens as the current occupancy

    with path.open("ab") as handle:
        handle.write(lines[20])  # the first reply after the compaction
    (reading,) = tailer.poll()
    cadence.observe(reading, reading_level(reading, DEFAULT_CODEX_VERSION), now)
    (sent,) = cadence.due(now)
    assert (sent.reading.last_usage.total_tokens, sent.reading.compaction_count, sent.resend) == (36_200, 1, 0)


def _line(kind: str, uid: str, at: str, **fields: object) -> dict[str, object]:
    return {"type": kind, "uuid": uid, "sessionId": "s1", "timestamp": f"2026-12-04T10:00:{at}Z", **fields}


def _reply(uid: str, at: str, prompt: int, output: int = 200, model: str = "claude-sonnet-4-5") -> dict[str, object]:
    usage = {"input_tokens": prompt, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    content = [{"type": "text", "text": "ok"}]
    message = {"id": f"msg_{uid}", "model": model, "role": "assistant", "content": content}
    return _line(
        "assistant", uid, at, requestId=f"req_{uid}", message=message | {"usage": usage | {"output_tokens": output}}
    )


ZERO_USAGE = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
SYNTHETIC = _line(
    "assistant",
    "e1",
    "02.000",
    isApiErrorMessage=True,
    message={
        "id": "e1",
        "model": "<synthetic>",
        "role": "assistant",
        "content": [{"type": "text", "text": "Prompt is too long"}],
        "usage": ZERO_USAGE,
    },
)
"""REFERENCES.md (2.1.328): a `<synthetic>` assistant record with `isApiErrorMessage: true` and zero usage."""


def _boundary(uid: str, at: str, pre: int) -> dict[str, object]:
    return _line("system", uid, at, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": pre})


def _summary(uid: str, at: str) -> dict[str, object]:
    return _line("user", uid, at, isCompactSummary=True, message={"role": "user", "content": "summary"})


def _tail(tmp_path: Path, lines: list[dict[str, object]]) -> TranscriptTailer:
    path = tmp_path / "projects" / "p" / "s1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))
    return TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")


def test_a_synthetic_api_error_record_is_no_usage_and_its_reactive_compaction_teaches_nothing(tmp_path: Path) -> None:
    tailer = _tail(tmp_path, [_reply("a1", "01.000", 150_000), SYNTHETIC])
    (reading,) = tailer.poll()  # the synthetic record's zero usage is no reading: the context did not empty
    assert reading.last_usage.total_tokens == 150_200
    assert tailer.state_of(tmp_path / "projects" / "p" / "s1.jsonl").reading(tailer.profile) == reading
    tailer.commit(final=True)
    # Claude Code compacts reactively after the refusal: at a plausible size it still teaches nothing.
    tailer = _tail(tmp_path, [_boundary("b1", "03.000", 176_000), _summary("s1u", "03.100")])
    tailer.poll()
    assert tailer.profile.learned.samples == {}
    assert tailer.profile.compaction_point(200_000, "claude-sonnet-4-5") == DEFAULT_POINT


def test_only_threshold_compactions_teach_the_point_and_a_reactive_one_far_below_is_ignored(tmp_path: Path) -> None:
    lines = [
        _reply("a1", "01.000", 27_000, output=30),
        _boundary("b1", "02.000", 27_030),  # the model server refused at 27,030: reactive, no threshold
        _summary("s1u", "02.100"),
        _reply("a2", "03.000", 170_000, output=6_000),
        _boundary("b2", "04.000", 176_000),
        _summary("s2u", "04.100"),
        _reply("a3", "05.000", 20_000),
    ]
    tailer = _tail(tmp_path, lines)
    readings = tailer.poll()
    assert tailer.profile.compaction_point(200_000, "claude-sonnet-4-5") == 176_000
    assert readings[-1].budget_pct == (176_000 - 20_200) / 176_000 * 100
    tailer.commit(final=True)
    restarted = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")
    assert restarted.profile.compaction_point(200_000, "claude-sonnet-4-5") == 176_000


def test_a_format_1_state_loses_its_single_learned_point(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"format": 1, "learned_compaction_point": 27_030, "files": {}}))
    tailer = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json")
    assert tailer.profile.compaction_point(200_000, "claude-sonnet-4-5") == DEFAULT_POINT


def test_transcript_and_status_line_readings_of_one_thread_are_on_one_scale(tmp_path: Path) -> None:
    """Both report as `worker_estimator`: a status-line report between two transcript replies must not make the
    second reply 'not newer' (issue 38.4: it froze the ring at 40%)."""
    from core.precedence import Verdict, judge, record_mark
    from reporter.claude_code.statusline import StatusInput, status_reading

    tailer = _tail(tmp_path, [_reply("a1", "01.000", 80_000)])
    (first,) = tailer.poll()
    tailer.commit(final=True)
    status = StatusInput("s1", "claude-sonnet-4-5", None, 200_000, None, 80_000, 200)
    shown = status_reading(status, tailer.profile, datetime(2026, 12, 4, 10, 0, 1, 500000, tzinfo=UTC))
    assert shown is not None
    (second,) = _tail(tmp_path, [_reply("a2", "02.000", 120_000)]).poll()

    @dataclass
    class _State:
        sources: list[SourceMark] = field(default_factory=list)
        source_kind: SourceKind = SourceKind.WORKER_ESTIMATOR
        stale: bool = False

    state = _State()
    for reading in (first, shown, second):
        snapshot = to_snapshot(reading, IDENTITY, DEFAULT_CODEX_VERSION)
        assert judge(snapshot, state) is Verdict.ACCEPT
        state.sources = record_mark(state.sources, snapshot)
    assert judge(to_snapshot(first, IDENTITY, DEFAULT_CODEX_VERSION), state) is Verdict.NOT_NEWER


def test_the_fleets_point_takes_precedence_over_the_point_the_tailer_learnt(tmp_path: Path) -> None:
    """The tailer's own point (176,000 from one threshold compaction) stands only until the fleet learns the key's:
    the snapshot says the tokens the budget measured, its window and Claude Code's version, and the engine measures
    them again against the fleet's point (`core.fleet_points.measured`)."""
    version = {"version": "2.1.328"}
    lines = [
        _reply("a1", "01.000", 170_000, output=6_000) | version,
        _boundary("b1", "02.000", 176_000) | version,
        _summary("s1u", "02.100") | version,
        _reply("a2", "03.000", 20_000) | version,
    ]
    _tail(tmp_path, lines)
    tailer = TranscriptTailer(tmp_path / "projects", tmp_path / "state.json", collect_events=True)
    reading = tailer.poll()[-1]
    samples = [e for e in tailer.take_events() if isinstance(e, UsageSample)]
    assert [s.tool_version for s in samples] == ["2.1.328", "2.1.328"]
    snapshot = to_snapshot(reading, IDENTITY, DEFAULT_CODEX_VERSION)
    assert (snapshot.context_tokens, snapshot.context_window_tokens, snapshot.tool_version) == (
        20_200,
        200_000,
        "2.1.328",
    )
    assert snapshot.context_budget_remaining_pct == (176_000 - 20_200) / 176_000 * 100  # the tailer's point
    assert measured(snapshot, no_points) == snapshot
    key = point_key("claude-code", "2.1.x", "claude-sonnet-4-5", 200_000)
    fleet = CompactionPoint(
        point_key=key,
        agent_tool="claude-code",
        tool_version="2.1.x",
        model="claude-sonnet-4-5",
        context_window_tokens=200_000,
        default_point_tokens=DEFAULT_POINT,
        compaction_point_tokens=150_000,
        updated_at=datetime(2026, 12, 4, 10, tzinfo=UTC),
    )
    remeasured = measured(snapshot, {key: fleet}.get)
    assert remeasured.context_budget_remaining_pct == (150_000 - 20_200) / 150_000 * 100
