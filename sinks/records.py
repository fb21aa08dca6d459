"""Records the sinks write that no topic carries yet: one finished compaction, for `compaction_events`.

The producer (the projection fold, which sees the compaction session events, with the engine's knowledge of a ready
handoff package) is another issue; this is the shape it hands the sink.
"""

from __future__ import annotations

from pydantic import Field

from schemas.base import Flag, Id, Name, Record, Timestamp, TokenCount
from schemas.enums import TriggerMode


class CompactionFinished(Record):
    """One compaction of a thread, from `compaction_started` to `compaction_completed` (seed 000 5.4, spec 9.5)."""

    event_id: Id = Field(description="The `compaction_completed` session event's id.")
    thread_id: Id
    project_id: Id
    trigger_mode: TriggerMode
    model: Name | None = Field(default=None, description="Model profile of the thread, when known.")
    started_at: Timestamp | None = None
    completed_at: Timestamp
    tokens_before: TokenCount | None = None
    tokens_after: TokenCount | None = None
    summary_token_count: TokenCount | None = Field(default=None, description="Size of the compaction summary.")
    handoff_ready: Flag = Field(description="A ready handoff package existed for this cycle when it started.")
