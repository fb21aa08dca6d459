"""Where the fleet sees each agent tool compact (issue 37): a record on the compacted `compaction-points` topic.

One record per point key (tool, tool version family, model, window), learned by the pipeline from the threshold
compactions every worker reports (`core.fleet_points`), read as a global table by the projection, and written to
ClickHouse with its evidence.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.base import Count, Id, IdList, Name, Record, ShortText, Timestamp, TokenCount

MAX_POINT_SAMPLES = 32
MAX_POINT_PROJECTS = 32


class PointSample(Record):
    """One threshold compaction: the tokens the thread held when it compacted."""

    event_id: Id = Field(description="The `compaction_completed` session event's id.")
    thread_id: Id
    tokens_before: TokenCount
    completed_at: Timestamp


class CompactionPoint(Record):
    point_key: Name = Field(description="`tool|version family|model|window`, the topic's key.")
    agent_tool: Name = Field(description="The model profile the compactions ran under (claude-code, codex, ...).")
    tool_version: ShortText = Field(default="", description="The tool's version family (`2.1.x`); empty: unknown.")
    model: ShortText = Field(default="", description="Empty when the threads' samples named none.")
    context_window_tokens: TokenCount
    default_point_tokens: TokenCount = Field(description="Where the profile's formula puts the point.")
    compaction_point_tokens: TokenCount | None = Field(
        default=None, description="The learned point (a robust median, bounded around the default); None: too few."
    )
    band_low_tokens: TokenCount | None = Field(
        default=None, description="The band around the point last announced: a learned point outside it is a move."
    )
    band_high_tokens: TokenCount | None = None
    samples: Annotated[list[PointSample], Field(max_length=MAX_POINT_SAMPLES)] = Field(
        default_factory=list, description="The recent threshold compactions the point is the median of, oldest first."
    )
    compactions: Count = Field(default=0, description="Threshold compactions behind the current point.")
    since: Timestamp | None = Field(default=None, description="When the first of them completed.")
    previous_point_tokens: TokenCount | None = Field(default=None, description="The point before the last move.")
    moved_at: Timestamp | None = Field(default=None, description="When the point last moved beyond its band.")
    moves: Count = 0
    project_ids: Annotated[IdList, Field(max_length=MAX_POINT_PROJECTS)] = Field(
        default_factory=list, description="Projects whose threads compacted on this key, told when the point moves."
    )
    updated_at: Timestamp
