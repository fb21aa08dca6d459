"""One project seen through the web page: its conversations, its ranking, and a thread with everything spec 6.3 shows.

Every read-model row goes in through the sinks' own path (`store`: row specs + the deduplicating writer); the thread's
state is the real engine's output for a thread that ran from safe to critical with a ready package (`engine_outputs`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas import (
    ContextBudgetIndicator,
    ContextManifest,
    ContextSection,
    ConversationContextIndicatorUpdated,
    ConversationItem,
    ProjectContextRiskUpdated,
    ProjectDetail,
    ThreadContextSummary,
    ThreadState,
)
from schemas.codec import encode_record
from schemas.compaction_points import CompactionPoint
from schemas.events import CompactionFinished, SnapshotVerdict
from schemas.projection import ThreadProjection
from sinks.migrations import migrate
from sinks.rows import TableSpec, columns
from sinks.tables import THREAD_CONTEXT_LATEST
from sinks.writer import write_batch
from tests.integration.test_api import VERSIONS, store
from tests.unit.engine.builders import snapshot
from tests.unit.sinks.records import compaction, compaction_point, engine_outputs, projection

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
WINDOW_TOKENS = 258_400
SECTIONS = [  # ~79% of the window: what a thread at a 20% budget was last built from
    ContextSection(key="system", label="System prompt", tokens=8_200),
    ContextSection(key="tools", label="Tool definitions", tokens=12_400, count=38),
    ContextSection(key="messages", label="Messages", tokens=178_300, count=412),
    ContextSection(key="handoff", label="Handoff summary", tokens=4_100),
]
STRATEGY = "Wrap up the critical thread and hand it off before it compacts; give new work to healthier threads."


def minute(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def conversation(
    conversation_id: str,
    project: str,
    kind: str,
    ring: tuple[int, str] | None,
    *,
    pinned: bool = False,
    reply_minute: float | None = None,
    stale: bool = False,
    title: str = "北区试产线回归",
) -> ConversationItem:
    shown = ContextBudgetIndicator(visible=False)
    if ring is not None:
        shown = ContextBudgetIndicator(visible=True, percent=ring[0], level=ring[1], stale=stale)
    return ConversationItem(
        conversation_id=conversation_id,
        conversation_type=kind,
        project_id=project,
        project_title=title,
        manual_pinned=pinned,
        latest_reply_at=None if reply_minute is None else minute(reply_minute),
        context_budget_indicator=shown,
        context_budget_source_node_id="mac-01" if ring else None,
        context_budget_updated_at=minute(0) if ring else None,
    )


def project_view(project: str, threads: list[str], summary: str = STRATEGY) -> ProjectDetail:
    """The ranking's view of the project: a critical thread (next risk, needs handoff), a watch one, a stale one."""
    critical, watching, quiet = threads
    rows = [
        (critical, 20.0, "critical", True, False),
        (watching, 52.7, "watch", False, False),
        (quiet, 81.0, "safe", False, True),
    ]
    return ProjectDetail(
        project_id=project,
        active_thread_contexts=[
            ThreadContextSummary(
                thread_id=thread,
                node_id="mac-01",
                context_budget_remaining_pct=pct,
                context_budget_level=level,
                must_finish_before_compaction=must_finish,
                compaction_expected_at=minute(12) if level == "critical" else None,
                stale=stale,
                updated_at=minute(0),
            )
            for thread, pct, level, must_finish, stale in rows
        ],
        next_compaction_risk_thread_id=critical,
        threads_requiring_handoff=[critical],
        master_context_strategy_summary=summary,
    )


def manifest(thread: str) -> ContextManifest:
    return ContextManifest(
        thread_id=thread,
        event_id=f"manifest-{thread}",
        occurred_at=minute(0),
        sections=SECTIONS,
        memory_ids=["mem-7"],
        estimated_window_tokens=WINDOW_TOKENS,
    )


def forecast_row(state: ThreadState, last: CompactionFinished) -> tuple[TableSpec, tuple[Any, ...]]:
    """The thread's latest row with the columns the projection fills (band, last trigger, manifest, window) set."""
    spec = TableSpec(
        THREAD_CONTEXT_LATEST.name,
        THREAD_CONTEXT_LATEST.columns
        + columns(
            compaction_expected_earliest_at=lambda _: minute(9),
            compaction_expected_latest_at=lambda _: minute(16),
            last_compaction_trigger_mode=lambda _: last.trigger_mode,
            context_window_tokens=lambda _: WINDOW_TOKENS,
            latest_manifest=lambda s: encode_record(manifest(s.thread_id)).decode(),
        ),
        versioned=True,
    )
    forecast = state.model_copy(
        update={"compaction_expected_at": minute(12), "last_compaction_at": last.completed_at, "compaction_count": 1}
    )
    return spec, spec.row(forecast, next(VERSIONS))


def measured_on(thread: str, project: str, last: CompactionFinished, point: CompactionPoint) -> ThreadProjection:
    """The thread's projection, with the figures of its latest row (`forecast_row`), measured on the fleet's point."""
    return projection(thread, project).model_copy(
        update={
            "context_window_tokens": WINDOW_TOKENS,
            "compaction_expected_earliest_at": minute(9),
            "compaction_expected_latest_at": minute(16),
            "last_compaction_trigger_mode": last.trigger_mode,
            "latest_manifest": manifest(thread),
            "compaction_point_key": point.point_key,
            "compaction_point_tokens": point.compaction_point_tokens,
        }
    )


SHOWN_PCT = 31.4
"""What Codex itself showed for the critical thread in its latest report, beside the ring's 20%."""


def tool_report(thread: str, project: str) -> SnapshotVerdict:
    """The thread's latest accepted report, with the additive fields a Codex reporter sends."""
    report = snapshot(20, thread=thread, project=project, seconds=30).model_copy(
        update={"agent_tool": "codex", "model": "gpt-5.3-codex", "shown_remaining_pct": SHOWN_PCT}
    )
    return SnapshotVerdict(snapshot=report, accepted=True, verdict="accept")


@dataclass(frozen=True)
class World:
    tag: str
    project: str
    other_project: str
    threads: list[str]
    conversations: list[ConversationItem]
    other_conversation: ConversationItem

    @property
    def thread(self) -> str:
        return self.threads[0]

    def conversation(self, kind: str) -> ConversationItem:
        return next(c for c in self.conversations if c.conversation_id.startswith(f"conv-{kind}-"))


def build_world(client: Any) -> World:
    migrate(client)
    tag = uuid.uuid4().hex[:8]
    project, other = f"proj-web-{tag}", f"proj-other-{tag}"
    threads = [f"thread-{name}-{tag}" for name in ("crit", "watch", "quiet")]
    outputs = engine_outputs(threads[0], project)
    for topic in ("thread-state", "alerts", "master-actions"):
        store(client, tag, topic, outputs[topic])
    last = compaction(threads[0], project)
    spec, row = forecast_row(outputs["thread-state"][-1], last)
    write_batch(client, spec, [row], f"browser-forecast-{tag}")
    store(client, tag, "compactions", [last])
    store(client, tag, "snapshot-verdicts", [tool_report(threads[0], project)])
    point = compaction_point("gpt-5.3-codex", project)  # where the fleet saw the thread's Codex compact
    store(client, tag, "compaction-points", [point])
    store(client, tag, "thread-projections", [measured_on(threads[0], project, last, point)])
    store(client, tag, "project-risk", [project_view(project, threads)])

    conversations = [  # in the list's order: pinned first, then the latest reply first
        conversation(f"conv-device-{tag}", project, "single_device", (52, "watch"), pinned=True, reply_minute=1),
        conversation(f"conv-master-{tag}", project, "master_agent", (80, "safe"), reply_minute=9, title="主 Agent"),
        conversation(f"conv-group-{tag}", project, "group", None, reply_minute=5, title="联调群"),
        conversation(f"conv-critical-{tag}", project, "single_device", (20, "critical"), reply_minute=2),
    ]
    other_conversation = conversation(f"conv-other-{tag}", other, "single_device", (64, "safe"), title="南区")
    store(client, tag, "conversation-indicators", [*conversations, other_conversation])
    return World(tag, project, other, threads, conversations, other_conversation)


def indicator_changed(
    item: ConversationItem, percent: int, level: str, at: datetime, *, stale: bool = False
) -> tuple[ConversationItem, ConversationContextIndicatorUpdated]:
    """A new value for a conversation's ring: the row the sink writes and the client event the stream publishes."""
    shown = ContextBudgetIndicator(visible=True, percent=percent, level=level, stale=stale)
    row = item.model_copy(update={"context_budget_indicator": shown, "context_budget_updated_at": at})
    event = ConversationContextIndicatorUpdated(
        event_id=f"ind-{item.conversation_id}-{percent}-{stale}",
        occurred_at=at,
        project_id=item.project_id,
        conversation_id=item.conversation_id,
        context_budget_indicator=shown,
        context_budget_source_node_id=item.context_budget_source_node_id,
        context_budget_updated_at=at,
    )
    return row, event


def risk_changed(project: str, threads: list[str], summary: str) -> tuple[ProjectDetail, ProjectContextRiskUpdated]:
    """A new ranking of the project: the stored view and its client event."""
    view = project_view(project, threads, summary)
    event = ProjectContextRiskUpdated(
        event_id=f"risk-{project}-{len(summary)}",
        occurred_at=minute(5),
        project_id=project,
        next_compaction_risk_thread_id=view.next_compaction_risk_thread_id,
        threads_requiring_handoff=view.threads_requiring_handoff,
        master_context_strategy_summary=summary,
    )
    return view, event
