"""Response bodies the API adds around the contract's read models (schemas.views), declared once for OpenAPI too."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, create_model

from core.relay_schedule import RelayVerdict
from schemas import (
    CompactionFinished,
    ContextManifest,
    ConversationItem,
    MasterAction,
    MasterActionItem,
    PackageStatus,
    ProjectDetail,
    ThreadContextBudget,
    ThreadContextSnapshot,
    ThreadContextSummary,
)
from schemas.base import Count, Id, IdList, Name, Percent, Record, ShortText
from schemas.views import Importance

MAX_RECENT_COMPACTIONS = 5


class ConversationPage(Record):
    """`GET /api/v1/conversations` (spec 6.1): pinned first, then the latest reply first."""

    items: Annotated[list[ConversationItem], Field(max_length=500)]
    next_cursor: ShortText | None = Field(
        default=None, description="Pass as `cursor` for the next page; null on the last page."
    )


class CompactionHistory(Record):
    compaction_count: Count = Field(description="Compactions recorded for the thread.")
    recent: Annotated[list[CompactionFinished], Field(max_length=MAX_RECENT_COMPACTIONS)] = Field(
        default_factory=list, description="The latest ones, newest first."
    )


class AgentToolShown(Record):
    """What a thread's latest report from its agent tool says: read from the snapshots (`api.reads.agent_tools`)."""

    agent_tool: Name | None = Field(default=None, description="The agent tool the thread runs, from its latest report.")
    model: Name | None = Field(default=None, description="Its model, from its latest report.")
    shown_remaining_pct: Percent | None = Field(
        default=None,
        description="The percent the agent tool itself displays (of its window), from its latest report: not the "
        "budget, which is the room before the tool's automatic compaction.",
    )


class ThreadContextDetail(AgentToolShown, ThreadContextBudget):
    """`GET /api/v1/threads/{thread_id}/context-budget` (spec 6.3) with the manifest and compaction history."""

    open_master_actions: Annotated[list[MasterActionItem], Field(max_length=len(MasterAction))] = Field(
        default_factory=list, description="`pending_master_actions` with their ids and states, to ack or complete."
    )
    latest_context_manifest: ContextManifest | None = None
    compaction_history: CompactionHistory = Field(default_factory=lambda: CompactionHistory(compaction_count=0))
    handoff_decision_package_id: str | None = Field(
        default=None, description="The latest package the engine demoted or rejected, while that verdict is current."
    )
    handoff_decision_reason: str = Field(default="", description="Why the engine demoted or rejected it.")
    futile_relay_reason: ShortText = Field(
        default="",
        description="Why relaying this thread's work again would be futile (its relay started above the watch "
        "threshold's use, or the same work was relayed moments ago); empty when a relay may help. The master does "
        "not relay such a thread, and the page should show this beside the handoff status.",
    )


def _beside(name: str, doc: str, *models: type[Record], **fields: Any) -> type[Record]:
    """A record with the fields of `models` in order, then `fields` (which may redeclare one of theirs).

    Not a subclass: the stream's records (ThreadContextSummary, ProjectDetail) must keep no subclass, or the codec's
    fast path no longer writes them, nor the engine's slot that holds them (schemas.codec.plain_model)."""
    declared = {n: (f.annotation, f) for model in models for n, f in model.model_fields.items()}
    return create_model(name, __base__=Record, __doc__=doc, __module__=__name__, **{**declared, **fields})


ProjectThreadContext = _beside(
    "ProjectThreadContext",
    "A thread of `GET /api/v1/projects/{project_id}`, with what its agent tool shows (as its own detail has).",
    ThreadContextSummary,
    AgentToolShown,
)
ProjectContextView = _beside(
    "ProjectContextView",
    "`GET /api/v1/projects/{project_id}` (spec 6.2): its threads with their agent tools.",
    ProjectDetail,
    active_thread_contexts=(Annotated[list[ProjectThreadContext], Field(max_length=10_000)], ...),  # type: ignore[valid-type]
)


class RelayLimitsShown(Record):
    per_node: Count = Field(description="Relays a worker node runs at once (`CTXBUDGET_API_RELAY_CAP_PER_NODE`).")
    per_project: Count = Field(description="Relays a project runs at once (`CTXBUDGET_API_RELAY_CAP_PER_PROJECT`).")
    repeat_seconds: float = Field(description="The same work relayed again sooner is futile.")


class RelayEntry(Record):
    thread_id: Id
    node_id: Id
    verdict: RelayVerdict = Field(description="start: relay it now; queued: wait for a free relay; futile: do not.")
    reason: ShortText
    queue_position: Count | None = Field(default=None, description="1 for the first thread waiting.")


class SubtaskTarget(Record):
    thread_id: Id | None = Field(description="The thread to give a new subtask to; null: start a fresh thread.")
    reason: ShortText


class RelaySchedule(Record):
    """`GET /api/v1/projects/{project_id}/relay-schedule`: the master's relays of a project under the caps."""

    project_id: Id
    limits: RelayLimitsShown
    running: IdList = Field(description="The project's threads whose relay runs: a draft or ready package, unconsumed.")
    node_relays: dict[Id, Count] = Field(
        description="Relays running on each node of the project's threads, over every project (the node cap's count)."
    )
    relays: Annotated[list[RelayEntry], Field(max_length=10_000)] = Field(
        description="Each thread requiring a handoff, most pressing first (spec 8.1), with its verdict and why."
    )
    new_subtask: SubtaskTarget = Field(description="Where a new subtask should go (spec 8.2.4), and why.")


THREAD_DETAIL_FROM_REPORT = tuple(
    name
    for name in ThreadContextDetail.model_fields
    if name in ThreadContextSnapshot.model_fields and name not in ThreadContextBudget.model_fields
)
"""The detail's fields a report (snapshot) has beyond the budget: read from the thread's latest report that says what
the agent tool shows (`api.reads.agent_tools`), so a snapshot field added to the detail reaches the page from
its column in thread_context_snapshots (`sinks.tables`), with no list to extend."""
THREAD_DETAIL_BUILT = frozenset(
    {
        "schema_version",
        "pending_master_actions",
        "open_master_actions",
        "wrap_up_checklist",
        "latest_context_manifest",
        "compaction_history",
        "futile_relay_reason",
    }
)
"""The detail's fields built from other columns and reads (`api.read_models.thread_detail`), not copied from one."""
THREAD_DETAIL_FROM_STATE = tuple(
    name
    for name in ThreadContextDetail.model_fields
    if name not in THREAD_DETAIL_BUILT and name not in THREAD_DETAIL_FROM_REPORT
)
"""The rest: copied from the thread's latest row (thread_context_latest with the projection's overlay)."""


class AlertAckAccepted(Record):
    accepted: bool
    alert_id: str


class HandoffPackageAccepted(Record):
    accepted: bool
    handoff_package_id: str
    package_status: PackageStatus = Field(description="The status the engine keeps the package in.")
    reason: ShortText | None = Field(
        default=None, description="Why the engine keeps it otherwise than sent (e.g. ready demoted to draft)."
    )


class ConsumeRequest(Record):
    """`POST /api/v1/handoff-packages/{id}/consume`: the relay thread that takes the work over."""

    to_thread_id: Id


class HandoffRequest(Record):
    """`POST /api/v1/threads/{id}/handoff-requests` (the body is optional): why the master asks, for the action."""

    reason: ShortText = ""


class TaskImportanceRequest(Record):
    """`PUT /api/v1/threads/{thread_id}/task-importance`: the importance of the thread's task (spec 8.1)."""

    task_importance: Importance
