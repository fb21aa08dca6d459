"""A reading: what a source knows about one thread at one point, and how it becomes a snapshot (spec 3.2).

Identity and versioning. A reading carries a `position`: an integer that grows with the source, per thread and source
kind (a rollout line's end offset in its file; for app-server notifications, which carry no time or sequence, the
arrival time in epoch milliseconds; for Claude Code, whose transcript and status line both report as
`worker_estimator`, the time observed in epoch milliseconds, so either source's newer reading is the newer one).
The version and id derive from it as `core.snapshot_identity` says (the API derives a report's the same way), so the
same reading sent again (a reporter that restarted before saving its read position re-reads the line) carries the
same id and version, and the engine drops it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from core.levels import classify_level
from core.profiles import CodexProfile, TokenUsage
from core.snapshot_identity import snapshot_id, snapshot_version
from schemas import (
    CompactionCompleted,
    CompactionStarted,
    ContextBudgetLevel,
    SourceKind,
    ThreadContextSnapshot,
    TriggerMode,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Identity:
    """Who reports: from the worker's configuration, stamped on every snapshot."""

    node_id: str
    worker_id: str
    project_id: str
    task_id: str | None = None


@dataclass(frozen=True)
class Reading:
    thread_id: str
    source_kind: SourceKind
    position: int
    """Grows with the source, per thread and source kind; the high bits of `snapshot_version`."""
    observed_at: datetime
    last_usage: TokenUsage
    context_window: int
    compaction_count: int = 0
    last_compaction_at: datetime | None = None
    must_finish: bool = False
    usage_stale: bool = False
    """The usage is from before the last compaction: the tool has not reported occupancy since. Such a reading is
    never sent as a snapshot (its percent would present the old occupancy as current): the reporter says the
    compaction at once as events (`compaction_events`), and its count and time also go out with the first usage
    reported after it."""
    agent_tool: str | None = None
    model: str | None = None
    budget_pct: float | None = None
    """Set by a source of another tool (Claude Code, with its profile); else the Codex profile computes it."""
    shown_pct: float | None = None
    """The percent the tool itself displays, when the source knows it; else Codex's own for Codex sources."""
    context_tokens: int | None = None
    """The tokens the tool compares with its compaction point, set by a source that computes `budget_pct`; else the
    Codex profile counts them from `last_usage`."""
    tool_version: str | None = None
    """The agent tool's version, when the source says it (the fleet learns its compaction points per release line)."""
    events_derived: bool = False
    """The source sends the thread's session events itself, its compactions included."""


def remaining_pct(reading: Reading, profile: CodexProfile) -> float:
    """The snapshot's budget: room before the tool's auto-compaction (not the percent the tool displays)."""
    if reading.budget_pct is not None:
        return reading.budget_pct
    return profile.remaining_pct(context_tokens(reading, profile), reading.context_window)


def context_tokens(reading: Reading, profile: CodexProfile) -> int:
    """What the budget measured: the engine measures it again against the fleet's point of the snapshot's key."""
    if reading.context_tokens is not None:
        return reading.context_tokens
    return profile.tokens_in_context_window(reading.last_usage)


_CODEX_SOURCES = frozenset({SourceKind.CODEX_APP_SERVER, SourceKind.CODEX_SDK})


def shown_pct(reading: Reading, profile: CodexProfile) -> float | None:
    """The percent the user sees in the tool, to put beside the budget."""
    if reading.shown_pct is not None:
        return reading.shown_pct
    if reading.source_kind in _CODEX_SOURCES:
        return float(profile.displayed_pct(reading.last_usage, reading.context_window))
    return None


def reading_level(reading: Reading, profile: CodexProfile) -> ContextBudgetLevel:
    """The level the worker reports, with the engine's own classification and spec 4's default policy."""
    return classify_level(remaining_pct(reading, profile))


def to_snapshot(
    reading: Reading,
    identity: Identity,
    profile: CodexProfile,
    resend: int = 0,
    captured_at: datetime | None = None,
) -> ThreadContextSnapshot:
    """The snapshot of a reading; a re-send passes its ordinal and the time it is sent."""
    version = snapshot_version(reading.position, resend)
    captured_at = captured_at or reading.observed_at
    pct = remaining_pct(reading, profile)
    return ThreadContextSnapshot(
        snapshot_id=snapshot_id(reading.thread_id, reading.source_kind, version, captured_at),
        snapshot_version=version,
        node_id=identity.node_id,
        worker_id=identity.worker_id,
        project_id=identity.project_id,
        task_id=identity.task_id,
        thread_id=reading.thread_id,
        source_kind=reading.source_kind,
        context_budget_remaining_pct=pct,
        context_budget_level=classify_level(pct),
        must_finish_before_compaction=reading.must_finish,
        last_compaction_at=reading.last_compaction_at,
        compaction_count=reading.compaction_count,
        captured_at=captured_at,
        agent_tool=reading.agent_tool or ("codex" if reading.source_kind in _CODEX_SOURCES else None),
        model=reading.model,
        shown_remaining_pct=shown_pct(reading, profile),
        context_tokens=context_tokens(reading, profile),
        context_window_tokens=reading.context_window,
        tool_version=reading.tool_version,
    )


CODEX_COMPACTION_TRIGGER = TriggerMode.REQUEST_START
"""Codex's compaction notices do not say what started one; the automatic compaction before a request is the usual."""


def compaction_events(
    reading: Reading, identity: Identity, profile: CodexProfile
) -> tuple[CompactionStarted, CompactionCompleted]:
    """What is known of a compaction before the tool reports usage again: that it happened, when, and the usage of
    before it. Said as its start and its end at that time: the projection records, at the start, whether a ready
    package existed for the cycle it ends (spec 9.5), and a compaction with no start records none. The ids derive
    from thread, source, count and time, so a notice read again gives the same events."""
    at = reading.last_compaction_at or reading.observed_at
    cause = f"{reading.source_kind.value}|{reading.thread_id}|{reading.compaction_count}|{at.isoformat()}"
    digest = hashlib.sha256(cause.encode()).hexdigest()[:32]
    common = {
        "thread_id": reading.thread_id,
        "occurred_at": at,
        "project_id": identity.project_id,
        "node_id": identity.node_id,
        "worker_id": identity.worker_id,
        "trigger_mode": CODEX_COMPACTION_TRIGGER,
        "tokens_before": profile.tokens_in_context_window(reading.last_usage),
    }
    return (
        CompactionStarted(event_id=f"compaction-start-{digest}", **common),
        CompactionCompleted(event_id=f"compaction-{digest}", **common),
    )


SKIP_LOG_SECONDS = 60.0
"""After the first skipped line of a reason, at most one warning per reason this often, with the count since: 5 MB of
garbage in one transcript was 19,699 warnings."""


class SkipLog:
    """Counts and logs input lines a parser cannot use (malformed, unknown, incomplete); never raises. The log is
    rate-limited per reason (`SKIP_LOG_SECONDS`); the counts are whole."""

    def __init__(self, source: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.counts: Counter[str] = Counter()
        self._clock = clock
        self._logged: dict[str, tuple[float, int]] = {}
        """Per reason: when it was last logged, and its count then."""

    def skip(self, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        now, last = self._clock(), self._logged.get(reason)
        if last is not None and now - last[0] < SKIP_LOG_SECONDS:
            return
        since = "" if last is None else f" ({self.counts[reason] - last[1]} since the last warning)"
        self._logged[reason] = (now, self.counts[reason])
        log.warning("%s: skipped a line (%s)%s: %s", self.source, reason, since, detail[:200])

    def note(self, reason: str) -> None:
        """Count a line skipped as expected (unknown future types, known oddities): no warning per line."""
        self.counts[reason] += 1
