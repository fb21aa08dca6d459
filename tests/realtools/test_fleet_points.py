"""The fleet's compaction points from the real tools (issue 37): Claude Code 2.1.328 compacting at one point and then,
with another `CLAUDE_CODE_AUTO_COMPACT_WINDOW`, at another, and Codex 0.169.0 at its `model_auto_compact_token_limit`.
Their transcripts and rollouts are read by the reporter's own tailers, and the session events run through the
pipeline's real declaration in memory (`streams.runtime.memory`): the learnt point follows each tool, each move is
told once, and an unrelated Claude Code thread of the same key is measured against the moved point, both its
projection and the snapshot its worker's reporter sends (which says its tokens, window and Claude Code's version).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.fleet_points import version_family
from core.profiles import DEFAULT_CODEX_VERSION, ClaudeCodeProfile, CodexProfile
from core.settings import Settings
from core.topics import CLIENT_EVENTS, COMPACTION_POINTS, SESSION_EVENTS, SNAPSHOTS, THREAD_PROJECTIONS
from reporter.claude_code.transcripts import TranscriptTailer
from reporter.codex.rollouts import RolloutTailer
from reporter.readings import Identity, to_snapshot
from schemas import CompactionPointMoved, ContextBudgetLevel, SessionEvent, ThreadContextSnapshot
from schemas.compaction_points import CompactionPoint
from schemas.projection import ThreadProjection
from streams.runtime.memory import MemoryRuntime
from streams.topology import wire
from tests.realtools.model_server import ModelServer, Script
from tests.realtools.sessions import CLAUDE_MODEL, CODEX_MODEL, ClaudeSession, CodexSession
from tests.realtools.tools import PINS, Tools, tools

pytestmark = pytest.mark.agent_tools

CLAUDE_WINDOW = 200_000
CLAUDE_KEY = f"claude-code|{version_family(PINS['@anthropic-ai/claude-code'])}|{CLAUDE_MODEL}|{CLAUDE_WINDOW}"
"""The reporters say the tool's version (the transcript's `version`, the rollout's `cli_version`): `2.1.x`."""
CODEX_WINDOW = 258_400
CODEX_KEY = f"codex|{version_family(PINS['@openai/codex'])}|{CODEX_MODEL}|{CODEX_WINDOW}"
CLAUDE_SCRIPT = Script(base_tokens=20_000, tokens_per_step=8_000, steps_per_turn=24)
"""Fine steps, so the compactions land near each point: one compaction a turn at either window."""
UNRELATED_SCRIPT = Script(base_tokens=20_000, tokens_per_step=8_000, steps_per_turn=12)
CODEX_SCRIPT = Script(base_tokens=20_000, tokens_per_step=15_000, steps_per_turn=18)
CODEX_LIMIT = 200_000
TURNS = 3
"""Compactions per point: a point is learnt from three, and a move needs three that agree."""


def played(session: ClaudeSession | CodexSession, turns: int) -> ClaudeSession | CodexSession:
    for _ in range(turns):
        session.turn("Work through the script.").check()
    return session


def reported(
    session: ClaudeSession | CodexSession, state: Path, worker: str
) -> tuple[list[SessionEvent], list[ThreadContextSnapshot]]:
    """What the worker's reporter says of the session, as it would say it (its tailers): the session events and the
    snapshots of its readings, named by the worker."""
    if isinstance(session, ClaudeSession):
        tailer: TranscriptTailer | RolloutTailer = TranscriptTailer(
            session.home / ".claude" / "projects", state, watch=False, collect_events=True
        )
    else:
        tailer = RolloutTailer(session.codex_home / "sessions", state, watch=False, collect_events=True)
    readings = tailer.poll()
    identity = Identity(node_id=f"node-{worker}", worker_id=worker, project_id=f"proj-{worker}")
    ids = {"project_id": identity.project_id, "node_id": identity.node_id, "worker_id": worker}
    events = [event.model_copy(update=ids) for event in tailer.take_events()]
    snapshots = [to_snapshot(r, identity, DEFAULT_CODEX_VERSION) for r in readings if not r.usage_stale]
    return events, snapshots


def events_of(session: ClaudeSession | CodexSession, state: Path, worker: str) -> list[SessionEvent]:
    return reported(session, state, worker)[0]


def send(memory: MemoryRuntime, events: Sequence[SessionEvent]) -> None:
    memory.now = datetime.now(UTC)
    for event in events:
        memory.produce(SESSION_EVENTS, event.thread_id, event)
    memory.drain()


def point_of(memory: MemoryRuntime, key: str) -> CompactionPoint:
    point = memory.latest(COMPACTION_POINTS)[key]
    assert isinstance(point, CompactionPoint)
    return point


def pre_tokens(session: ClaudeSession) -> list[int]:
    return [boundary["compactMetadata"]["preTokens"] for boundary in session.compactions()]


@pytest.fixture(scope="module")
def binaries() -> Tools:
    return tools()


def test_the_learnt_point_follows_the_real_tools_and_moves_an_unrelated_thread(binaries: Tools, tmp_path: Path) -> None:
    memory = MemoryRuntime(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path), datetime.now(UTC))
    wire(memory, memory.settings)
    # An unrelated Claude Code thread, on another worker and project, that climbs to 116,000 without compacting: the
    # first half of its turn is read before the fleet learns anything.
    with ModelServer(claude=UNRELATED_SCRIPT) as server:
        unrelated = played(ClaudeSession(binaries.claude, server, tmp_path / "unrelated", timeout=300), 1)
    assert isinstance(unrelated, ClaudeSession)
    assert unrelated.compactions() == []
    its_events, its_snapshots = reported(unrelated, tmp_path / "unrelated.json", "worker-u")
    half = next(i for i, e in enumerate(its_events) if e.type == "usage_sample" and e.input_tokens >= 100_000)
    send(memory, its_events[:half])

    with ModelServer(claude=CLAUDE_SCRIPT, codex=CODEX_SCRIPT) as server:
        # Claude Code at its measured window (the formula says 177,000).
        first = played(ClaudeSession(binaries.claude, server, tmp_path / "first", timeout=300), TURNS)
        assert isinstance(first, ClaudeSession)
        send(memory, events_of(first, tmp_path / "first.json", "worker-a"))
        learnt = point_of(memory, CLAUDE_KEY)
        samples = [s.tokens_before for s in learnt.samples]
        assert len(pre_tokens(first)) == TURNS
        assert sorted(samples) == sorted(pre_tokens(first))
        assert learnt.compaction_point_tokens is not None
        assert min(samples) <= learnt.compaction_point_tokens <= max(samples)
        assert learnt.moves == 0, learnt  # within 3% of the formula's: nothing to tell

        # A smaller window moves Claude Code's point, as a vendor's change would.
        moved_env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "180000"}
        second = played(
            ClaudeSession(binaries.claude, server, tmp_path / "second", env=moved_env, timeout=300), TURNS + 1
        )  # a window of nine holding three of the old point's needs four of the new one's for its median
        assert isinstance(second, ClaudeSession)
        send(memory, events_of(second, tmp_path / "second.json", "worker-b"))
        moved = point_of(memory, CLAUDE_KEY)
        assert max(pre_tokens(second)) < min(pre_tokens(first))
        assert min(pre_tokens(second)) <= moved.compaction_point_tokens <= max(pre_tokens(second))
        assert moved.moves == 1, moved
        assert moved.previous_point_tokens is not None
        assert min(samples) <= moved.previous_point_tokens <= max(samples)  # it followed its samples until the move

        # The unrelated thread's next turns are measured against the moved point: critical, where the formula's
        # point (or the one first learnt) kept it urgent.
        send(memory, its_events[half:])
        projection = memory.latest(THREAD_PROJECTIONS)[unrelated.session_id]
        assert isinstance(projection, ThreadProjection)
        assert moved.compaction_point_tokens is not None
        state = memory.state("thread_engine", unrelated.session_id).state
        claude = ClaudeCodeProfile()
        used = projection.projected_tokens
        assert state.context_budget_remaining_pct == claude.remaining_pct(
            used, CLAUDE_WINDOW, point=moved.compaction_point_tokens
        )
        assert state.context_budget_level is ContextBudgetLevel.CRITICAL
        assert claude.remaining_pct(used, CLAUDE_WINDOW) >= 25.0  # the formula's: urgent at most

        # The snapshot its worker's reporter sends (measured by the reporter against its own point) is measured
        # again by the engine against the fleet's, and outranks the projection's estimate.
        report = its_snapshots[-1]
        assert report.tool_version == PINS["@anthropic-ai/claude-code"]
        assert report.context_tokens is not None
        memory.produce(SNAPSHOTS, report.thread_id, report)
        memory.drain()
        state = memory.state("thread_engine", unrelated.session_id).state
        assert state.source_kind is report.source_kind
        assert state.context_budget_remaining_pct == claude.remaining_pct(
            report.context_tokens, CLAUDE_WINDOW, point=moved.compaction_point_tokens
        )
        assert state.context_budget_remaining_pct < report.context_budget_remaining_pct
        assert state.context_budget_level is ContextBudgetLevel.CRITICAL

        # Codex at its configured limit, far from the catalog's 90%.
        codex = played(
            CodexSession(binaries.codex, server, tmp_path / "codex", timeout=300,
                         config=f"model_auto_compact_token_limit = {CODEX_LIMIT}"),
            TURNS,
        )  # fmt: skip
        assert isinstance(codex, CodexSession)
        send(memory, events_of(codex, tmp_path / "codex.json", "worker-c"))
        codex_point = point_of(memory, CODEX_KEY)
        assert len(codex.compactions()) >= TURNS
        assert codex_point.compaction_point_tokens is not None
        assert CODEX_LIMIT <= codex_point.compaction_point_tokens < CodexProfile().default_point(CODEX_WINDOW)
        assert codex_point.previous_point_tokens == CodexProfile().default_point(CODEX_WINDOW)

    told = [e for e in memory.records(CLIENT_EVENTS) if isinstance(e, CompactionPointMoved)]
    # each move once, to each project whose threads compacted on the key
    assert sorted((e.point_key, e.project_id) for e in told) == [
        (CLAUDE_KEY, "proj-worker-a"),
        (CLAUDE_KEY, "proj-worker-b"),
        (CODEX_KEY, "proj-worker-c"),
    ]
