"""Records for the sink tests, produced by the real engine on a short scripted thread (no hand-made outputs)."""

from __future__ import annotations

from collections import defaultdict

from core.engine_config import EngineConfig
from core.fleet_points import learn
from core.profiles import CodexProfile, ProfileSet
from schemas import (
    DEFAULT_POLICY,
    CompactionStarted,
    ContextBudgetIndicator,
    ConversationItem,
    DeadLetter,
    ProjectDetail,
    Record,
    ThreadContextSummary,
    ThresholdPolicy,
)
from schemas.compaction_points import CompactionPoint
from schemas.events import CompactionFinished
from schemas.projection import ThreadProjection
from streams.engine.fold import ThreadSlot, apply_compaction_started, apply_handoff, apply_snapshot
from streams.projection.batch import Projection, apply
from streams.projection.config import ProjectionConfig
from streams.projection.estimator import TokenEstimator
from tests.unit.engine.builders import at, package, snapshot
from tests.unit.projection.builders import completed, manifest, started, usage

PROJECTION = Projection(TokenEstimator(), ProfileSet(), ProjectionConfig(), {}.get)

CONFIG = EngineConfig()


def engine_outputs(thread: str = "thread-a", project: str = "proj-1") -> dict[str, list[Record]]:
    """What the engine publishes, per output topic, for a thread that runs from safe to critical with a package."""
    slot: ThreadSlot | None = None
    out: dict[str, list[Record]] = defaultdict(list)
    steps = [
        lambda s: apply_snapshot(
            s, snapshot(80, thread=thread, project=project, seconds=0), DEFAULT_POLICY, at(0), CONFIG
        ),
        lambda s: apply_snapshot(
            s,
            snapshot(35, thread=thread, project=project, seconds=10, must_finish=True, expected_in=120),
            DEFAULT_POLICY,
            at(10),
            CONFIG,
        ),
        lambda s: apply_handoff(
            s, package("ready", thread=thread, package_id=f"hp-{thread}", seconds=20), at(20), CONFIG
        ),
        lambda s: apply_snapshot(
            s, snapshot(20, thread=thread, project=project, seconds=30), DEFAULT_POLICY, at(30), CONFIG
        ),
        lambda s: apply_compaction_started(
            s,
            CompactionStarted(thread_id=thread, event_id=f"cs-{thread}", occurred_at=at(40), trigger_mode="mid_loop"),
            at(40),
            CONFIG,
        ),
    ]
    for step in steps:
        result = step(slot)
        slot = result.slot or slot
        for emit in result.emits:
            out[emit.topic].append(emit.record)
        if result.slot is not None and result.slot.state is not None:
            out["thread-state"].append(result.slot.state)  # as the batch publishes every changed slot's state
    return out


def compaction(thread: str = "thread-a", project: str = "proj-1") -> CompactionFinished:
    return CompactionFinished(
        event_id=f"cc-{thread}",
        thread_id=thread,
        project_id=project,
        trigger_mode="mid_loop",
        model="gpt-5-codex",
        started_at=at(40),
        completed_at=at(45),
        tokens_before=240_000,
        tokens_after=18_000,
        summary_token_count=2_500,
        handoff_ready=True,
        context_window_tokens=258_400,
        tool_version="0.169.0",
    )


def compaction_point(model: str = "gpt-5-codex", project: str = "proj-1") -> CompactionPoint:
    """The fleet's point of a Codex key after threshold compactions from one thread, as the real fold learns it."""
    point = None
    for minute, tokens in enumerate((231_000, 232_000, 230_500)):
        finished = compaction(f"thread-{minute}", project).model_copy(
            update={"event_id": f"cc-{minute}", "model": model, "model_profile": "codex", "tokens_before": tokens,
                    "completed_at": at(60 * minute)}
        )  # fmt: skip
        point = learn(point, finished, CodexProfile().default_point(258_400)).point or point
    assert point is not None
    return point


def projection(thread: str = "thread-a", project: str = "proj-1") -> ThreadProjection:
    """The projection fold's record for a thread that read a manifest, sampled usage and compacted."""
    events = [
        usage(200_000, 0, model="gpt-5-codex", window=272_000),
        manifest({"system": 4_000, "tools": 6_000, "messages": 190_000}, window=272_000, seconds=1),
        started(2),
        completed(3, before=200_000, after=20_000),
    ]
    state, emitted = None, []
    for event in events:
        change = apply(state, event.model_copy(update={"thread_id": thread, "project_id": project}), PROJECTION)
        state = change.state or state
        emitted += [e.record for e in change.emits if e.topic == "thread-projections"]
    return emitted[-1]


def conversation(conversation_id: str = "conv-1", *, pinned: bool = False, percent: int = 52) -> ConversationItem:
    return ConversationItem(
        conversation_id=conversation_id,
        conversation_type="single_device",
        project_id="proj-1",
        project_title="北区试产线回归",
        manual_pinned=pinned,
        latest_reply_at=at(50),
        context_budget_indicator=ContextBudgetIndicator(visible=True, percent=percent, level="watch"),
        context_budget_source_node_id="mac-01",
        context_budget_updated_at=at(50),
    )


def project_detail(project: str = "proj-1", next_risk: str | None = "thread-a") -> ProjectDetail:
    summary = ThreadContextSummary(
        thread_id="thread-a",
        node_id="mac-01",
        context_budget_remaining_pct=20.0,
        context_budget_level="critical",
        must_finish_before_compaction=True,
        updated_at=at(30),
    )
    return ProjectDetail(
        project_id=project,
        active_thread_contexts=[summary],
        next_compaction_risk_thread_id=next_risk,
        threads_requiring_handoff=["thread-a"],
        master_context_strategy_summary="wrap up thread-a before it compacts",
    )


def policy(project: str = "proj-1") -> ThresholdPolicy:
    return ThresholdPolicy(
        project_id=project, safe_min_pct=70.0, watch_min_pct=50.0, urgent_min_pct=30.0, updated_at=at(1)
    )


def dead_letter(topic: str = "ctx.snapshots", offset: int = 3) -> DeadLetter:
    return DeadLetter(
        source_topic=topic,
        partition=1,
        offset=offset,
        reason="invalid_json",
        detail="line 1 column 5",
        original_key=b"thread-a",
        original_value=b'{"x":',
        received_at=at(60),
    )
