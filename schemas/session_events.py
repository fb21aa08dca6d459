"""Session events: what happens inside an agent thread, from which the budget can be projected (seeds 003 and 000).

One discriminated union keyed by `type`. Every event carries `thread_id`, `event_id` (unique per thread; consumers drop
repeats) and `occurred_at`. Surface events carry either the text (the estimator counts it) or a token count (the worker
counted already), never both.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, model_validator

from schemas.base import (
    Count,
    Flag,
    Id,
    IdList,
    LongText,
    Name,
    Record,
    ShortText,
    SurfaceText,
    TextList,
    Timestamp,
    TokenCount,
)
from schemas.enums import MessageRole, TriggerMode, WorkFact


class SessionEventBase(Record):
    thread_id: Id
    event_id: Id
    occurred_at: Timestamp
    project_id: Id | None = Field(default=None, description="Set when the producer knows it; else taken from state.")
    node_id: Id | None = Field(default=None, description="The machine the thread runs on, when the producer knows it.")
    worker_id: Id | None = Field(default=None, description="The worker that runs the thread, when known.")


def _require_exactly_one(record: Record, first: str, second: str) -> None:
    """Content is sent as text or as a precomputed token count: exactly one of the two."""
    if (getattr(record, first) is None) == (getattr(record, second) is None):
        raise ValueError(f"give exactly one of {first} or {second}")


class _TextOrTokens(SessionEventBase):
    text: SurfaceText | None = None
    token_count: TokenCount | None = None

    @model_validator(mode="after")
    def _exactly_one_measure(self) -> _TextOrTokens:
        _require_exactly_one(self, "text", "token_count")
        return self


class UsageSample(SessionEventBase):
    """The provider's report of one request: the prompt tokens it really carried (exact, seed 003 `pressure_tokens`)."""

    type: Literal["usage_sample"] = "usage_sample"
    input_tokens: TokenCount = Field(description="Prompt tokens the request used, cached ones included.")
    cached_input_tokens: TokenCount = 0
    output_tokens: TokenCount = 0
    reasoning_output_tokens: TokenCount = 0
    model: Name | None = None
    context_window_tokens: TokenCount | None = Field(default=None, description="The model's window, when reported.")
    tool_version: Name | None = Field(
        default=None, description="Additive: the agent tool's version (Claude Code's `version`, Codex's `cli_version`)."
    )


class MessageAdded(_TextOrTokens):
    """A message joined the surface the next request will carry."""

    type: Literal["message_added"] = "message_added"
    role: MessageRole


class ToolResultAdded(_TextOrTokens):
    """A tool result joined the surface. `truncated` is the tool's own flag (seed 000 5.6)."""

    type: Literal["tool_result_added"] = "tool_result_added"
    tool_name: Name
    truncated: Flag = False


class ContextSection(Record):
    """One section of a context manifest (seed 000 5.2 `ContextSectionStat`)."""

    key: Name
    label: Name
    tokens: TokenCount
    count: Count | None = None


class ContextManifest(SessionEventBase):
    """What the last request was built from: tokens per section, injected memory ids, the effective window."""

    type: Literal["context_manifest"] = "context_manifest"
    sections: Annotated[list[ContextSection], Field(max_length=64)]
    memory_ids: IdList = Field(default_factory=list)
    estimated_window_tokens: TokenCount | None = Field(default=None, description="Effective window, when known.")


class CompactionStarted(SessionEventBase):
    type: Literal["compaction_started"] = "compaction_started"
    trigger_mode: TriggerMode
    tokens_before: TokenCount | None = None


class CompactionSummary(SessionEventBase):
    """The summary that replaces the compacted span: the surface drops to it at once (seed 003)."""

    type: Literal["compaction_summary"] = "compaction_summary"
    trigger_mode: TriggerMode
    summary_text: LongText | None = None
    summary_token_count: TokenCount | None = None
    replaced_through_event_id: Id | None = Field(
        default=None, description="Last surface event the summary replaces; absent means every message so far."
    )

    @model_validator(mode="after")
    def _exactly_one_measure(self) -> CompactionSummary:
        _require_exactly_one(self, "summary_text", "summary_token_count")
        return self


class CompactionCompleted(SessionEventBase):
    type: Literal["compaction_completed"] = "compaction_completed"
    trigger_mode: TriggerMode
    tokens_before: TokenCount | None = None
    tokens_after: TokenCount | None = None


class CompactRequested(SessionEventBase):
    """Someone asked for a manual compaction (seed 000 5.4 `compact_now`)."""

    type: Literal["compact_requested"] = "compact_requested"
    requested_by: Id


class MemoryInjectionChanged(SessionEventBase):
    """Per-session memory injection switched on or off; effective from the next execution (seed 000 5.1)."""

    type: Literal["memory_injection_changed"] = "memory_injection_changed"
    enabled: Flag


class WorkFactChanged(SessionEventBase):
    """A work-state fact of spec 4.2 began (`active`) or was resolved; any active fact means must-finish."""

    type: Literal["work_fact_changed"] = "work_fact_changed"
    fact: WorkFact
    active: Flag
    detail: ShortText = ""
    files: TextList = Field(default_factory=list, description="Files involved (for the wrap-up checklist, spec 8.3).")


class ThreadWorkerMoved(SessionEventBase):
    """An operator moved the thread to another worker (`PUT /api/v1/threads/{thread_id}/worker`). A thread belongs to
    the worker that first reported it: the engine refuses another worker's snapshots and events (`worker_mismatch`)
    until this recorded act names the new one. Applied only while the thread is still `from_worker_id`'s."""

    type: Literal["thread_worker_moved"] = "thread_worker_moved"
    from_worker_id: Id = Field(description="The worker the thread belonged to when the move was made.")
    to_worker_id: Id = Field(description="The worker the thread belongs to from now on.")
    moved_by: Id = Field(description="The operator who moved it (the token's subject).")
    reason: Annotated[ShortText, Field(min_length=1)] = Field(description="Why, as the operator gave it.")


SessionEvent = Annotated[
    UsageSample
    | MessageAdded
    | ToolResultAdded
    | ContextManifest
    | CompactionStarted
    | CompactionSummary
    | CompactionCompleted
    | CompactRequested
    | MemoryInjectionChanged
    | WorkFactChanged
    | ThreadWorkerMoved,
    Field(discriminator="type"),
]
SESSION_EVENT_ADAPTER: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)
