"""The fleet's compaction points through the topology's own declaration, in memory: one thread's threshold
compactions move the point of its key, the move is told once, and an unrelated thread of the same key (another
project, another worker) is measured against the new point: its reading, its forecast and the engine's level."""

from __future__ import annotations

from pathlib import Path

from core.levels import classify_level
from core.profiles import CodexProfile
from core.settings import Settings
from core.topics import (
    CLIENT_EVENTS,
    COMPACTION_POINTS,
    COMPACTIONS,
    SESSION_EVENTS,
    SNAPSHOT_VERDICTS,
    SNAPSHOTS,
    THREAD_PROJECTIONS,
)
from schemas import (
    CompactionPointMoved,
    ContextBudgetLevel,
    Record,
    SnapshotVerdict,
    ThreadContextSnapshot,
)
from schemas.compaction_points import CompactionPoint
from schemas.projection import ThreadProjection
from streams.runtime.memory import MemoryRuntime
from streams.topology import wire
from tests.unit.compaction_points.builders import CLAUDE_DEFAULT, MODEL, MOVED_TO, T0, WINDOW, Thread, at
from tests.unit.engine.builders import snapshot


def runtime(tmp_path: Path) -> MemoryRuntime:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path)
    memory = MemoryRuntime(settings, T0)
    wire(memory, settings)
    return memory


def send(memory: MemoryRuntime, records: list[Record], minute: float) -> None:
    memory.now = at(minute)
    for record in records:
        topic = SNAPSHOTS if isinstance(record, ThreadContextSnapshot) else SESSION_EVENTS
        memory.produce(topic, record.thread_id, record)  # type: ignore[attr-defined]
    memory.drain()


def test_one_threads_compactions_move_the_point_and_an_unrelated_threads_level_with_it(tmp_path: Path) -> None:
    memory = runtime(tmp_path)
    other = Thread("thread-b", "proj-2", "worker-b")
    send(memory, [other.usage(125_000, 0)], 0)
    before = memory.state("thread_engine", "thread-b").state
    assert before.context_budget_level is ContextBudgetLevel.URGENT  # (177,000 - 125,000) / 177,000: 29%

    compacting = Thread("thread-a", "proj-1", "worker-a")
    for n in range(4):
        send(memory, compacting.compaction(MOVED_TO + 100 * n, 10 + n), 10 + n)

    [*_, finished] = memory.records(COMPACTIONS)
    assert (finished.context_window_tokens, finished.tool_version) == (WINDOW, "2.1.328")  # type: ignore[attr-defined]
    [point] = memory.latest(COMPACTION_POINTS).values()
    assert isinstance(point, CompactionPoint)
    assert (point.point_key, point.compaction_point_tokens, point.compactions) == (
        f"claude-code|2.1.x|{MODEL}|{WINDOW}",
        MOVED_TO + 150,  # the median of the four: it follows its samples inside the band
        4,
    )
    # told once, to the project whose thread compacted
    [moved] = [e for e in memory.records(CLIENT_EVENTS) if isinstance(e, CompactionPointMoved)]
    assert (moved.project_id, moved.previous_point_tokens, moved.compaction_point_tokens) == (
        "proj-1",
        CLAUDE_DEFAULT,
        MOVED_TO + 100,  # the median of the three that settled it
    )
    assert (
        moved.reason
        == "Claude Code 2.1.x on claude-sonnet-4-5 now compacts at 150k (was 177k, 3 compactions since 08:10)"
    )

    send(memory, [other.usage(126_000, 20, version="2.1.330")], 20)  # a patch release of the same line
    after = memory.state("thread_engine", "thread-b").state
    assert after.context_budget_level is ContextBudgetLevel.CRITICAL
    assert after.context_budget_remaining_pct == (MOVED_TO + 150 - 126_000) / (MOVED_TO + 150) * 100
    projection = memory.latest(THREAD_PROJECTIONS)["thread-b"]
    assert isinstance(projection, ThreadProjection)
    # the forecast too: 1,000 tokens a turn (its two samples) left before the new point, not the formula's
    assert projection.estimated_remaining_turns == (MOVED_TO + 150 - 126_000) // 1_000
    # and it names the key and the point its readers show beside the level (`GET /api/v1/compaction-points`)
    assert (projection.compaction_point_key, projection.compaction_point_tokens) == (point.point_key, MOVED_TO + 150)


def test_a_thread_of_another_key_keeps_the_formulas_point(tmp_path: Path) -> None:
    memory = runtime(tmp_path)
    compacting = Thread("thread-a", "proj-1", "worker-a")
    for n in range(4):
        send(memory, compacting.compaction(MOVED_TO, 10 + n), 10 + n)
    elsewhere = Thread("thread-c", "proj-2", "worker-c")
    send(memory, [elsewhere.usage(125_000, 20, version="2.2.1")], 20)
    state = memory.state("thread_engine", "thread-c").state
    assert state.context_budget_remaining_pct == (CLAUDE_DEFAULT - 125_000) / CLAUDE_DEFAULT * 100
    projection = memory.latest(THREAD_PROJECTIONS)["thread-c"]
    assert isinstance(projection, ThreadProjection)
    assert (projection.compaction_point_key, projection.compaction_point_tokens) == (
        f"claude-code|2.2.x|{MODEL}|{WINDOW}",
        CLAUDE_DEFAULT,
    )


def test_a_workers_snapshot_that_says_its_tokens_is_measured_against_the_fleets_point(tmp_path: Path) -> None:
    """Codex with `model_auto_compact_token_limit` lowered: its app-server reports, which outrank the projection's,
    are measured by the reporter against the catalog's 90%; the engine measures them against where the fleet saw
    that Codex compact, and keeps the worker's figure in the snapshot's verdict."""
    memory = runtime(tmp_path)
    window = 258_400
    codex = CodexProfile()
    compacting = Thread("thread-a", "proj-1", "worker-a", model="gpt-5.5", window=window)
    for n in range(3):
        send(memory, compacting.compaction(200_000, 10 + n, version="0.169.0"), 10 + n)
    [moved] = [e for e in memory.records(CLIENT_EVENTS) if isinstance(e, CompactionPointMoved)]
    assert moved.reason.startswith("Codex 0.169.x on gpt-5.5 now compacts at 200k (was 245k")

    reported = codex.remaining_pct(150_000, window)  # the reporter's, against 244,800
    report = snapshot(reported, thread="thread-d", project="proj-3", seconds=20 * 60).model_copy(
        update={"agent_tool": "codex", "model": "gpt-5.5", "tool_version": "0.169.2", "context_tokens": 150_000,
                "context_window_tokens": window}
    )  # fmt: skip
    send(memory, [report], 20)
    state = memory.state("thread_engine", "thread-d").state
    assert classify_level(reported) is ContextBudgetLevel.WATCH
    assert state.context_budget_remaining_pct == codex.remaining_pct(150_000, window, point=200_000)
    assert state.context_budget_level is ContextBudgetLevel.URGENT
    [verdict] = [v for v in memory.records(SNAPSHOT_VERDICTS) if isinstance(v, SnapshotVerdict)
                 and v.snapshot.thread_id == "thread-d"]  # fmt: skip
    assert verdict.snapshot.context_budget_remaining_pct == reported
