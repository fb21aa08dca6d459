"""Where the fleet sees each tool compact, learned in the pipeline from the compactions every worker reports (issue 37).

A point key is (tool, tool version family, model, window): a vendor moves the point per release line, model and
window, and a patch release seldom does, so `2.1.328` and `2.1.330` learn together as `2.1.x`. Only threshold
compactions teach (`core.compaction_points.is_threshold_compaction`: automatic, within the plausible band around the
profile's formula); a manual or reactive one says nothing of the threshold. The point is the robust median of the
recent samples, bounded to that band, once `MIN_SAMPLES` agree enough to have one.

A point is announced with a band of `MOVE_FRACTION` around it. While the learned point stays inside, it follows the
samples without a word; once it leaves, and the latest compactions agree with it, the point *moved*: the band
re-centres on it, the evidence restarts from the samples inside the new band, and the move is told once. The first
point is judged against the formula's, so a vendor who moved the point before the fleet ever saw the key is told too.
A reactive compaction can only be told from a threshold one by its size: the pipeline's events do not say whether an
API error came before it, as the reporter's transcript does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from core.compaction_points import compaction_band, is_threshold_compaction, robust_point
from core.ids import derived_id
from core.profiles import ProfileSet
from schemas import CompactionFinished, CompactionPointMoved, ThreadContextSnapshot, TriggerMode
from schemas.compaction_points import MAX_POINT_PROJECTS, CompactionPoint, PointSample

SAMPLES_KEPT = 9
"""Recent threshold compactions per key: a point the vendor moves is followed after five of the new."""
MIN_SAMPLES = 3
"""A point is learned from this many threshold compactions; before that the formula's stands."""
MOVE_FRACTION = 0.03
"""A learned point this far (either side) from the one announced has moved: Claude Code's move from 167,000 to
177,000 is 6%, while one release line's points wobble by a turn's growth."""
TOOL_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}
PROFILES = ProfileSet()
"""The profiles a snapshot's `agent_tool` names (the reporters' names are the profiles')."""


def version_family(version: str | None) -> str:
    """`2.1.328` -> `2.1.x`; a version without a minor part stays whole; empty when unknown."""
    if not version:
        return ""
    parts = version.split(".")
    return f"{parts[0]}.{parts[1]}.x" if len(parts) >= 3 else version


def point_key(tool: str, version: str, model: str, window: int) -> str:
    return f"{tool}|{version}|{model}|{window}"


def key_of(compaction: CompactionFinished) -> str | None:
    """The point key a finished compaction teaches; None when it lacks the tool or the window."""
    if compaction.model_profile is None or compaction.context_window_tokens is None:
        return None
    return thread_key(
        compaction.model_profile, compaction.tool_version, compaction.model, compaction.context_window_tokens
    )


@dataclass(frozen=True)
class Learned:
    point: CompactionPoint | None
    """The key's new record; None when the compaction taught nothing (not a threshold one, or seen already)."""
    moved: bool = False
    """The learned point left the band of the one announced: tell it, once."""


UNCHANGED = Learned(None)


def learn(state: CompactionPoint | None, compaction: CompactionFinished, default_point: int) -> Learned:
    """The key's point after one more finished compaction; `default_point` is the profile's formula for the key."""
    key = key_of(compaction)
    tokens, window = compaction.tokens_before, compaction.context_window_tokens
    if key is None or window is None or tokens is None or compaction.trigger_mode is TriggerMode.MANUAL:
        return UNCHANGED
    if not is_threshold_compaction(tokens, default_point, window, after_api_error=False):
        return UNCHANGED
    if state is not None and any(s.event_id == compaction.event_id for s in state.samples):
        return UNCHANGED  # a repeat of a sample still kept
    current = state or CompactionPoint(
        point_key=key,
        agent_tool=compaction.model_profile or "",
        tool_version=version_family(compaction.tool_version),
        model=compaction.model or "",
        context_window_tokens=window,
        default_point_tokens=default_point,
        updated_at=compaction.completed_at,
    )
    sample = PointSample(
        event_id=compaction.event_id,
        thread_id=compaction.thread_id,
        tokens_before=tokens,
        completed_at=compaction.completed_at,
    )
    samples = [*current.samples, sample][-SAMPLES_KEPT:]
    projects = [p for p in current.project_ids if p != compaction.project_id]
    update: dict[str, object] = {
        "samples": samples,
        "project_ids": [*projects, compaction.project_id][-MAX_POINT_PROJECTS:],
        "compactions": current.compactions + 1,
        "since": current.since or compaction.completed_at,
        "updated_at": max(current.updated_at, compaction.completed_at),
    }
    learned = bounded_point(samples, default_point, window)
    if learned is None:
        return Learned(current.model_copy(update=update))
    announced = current.compaction_point_tokens
    centre = default_point if announced is None else _centre(current)
    low, high = move_band(centre)
    moved = not low <= learned <= high
    if moved and not _settled(samples, learned):
        return Learned(current.model_copy(update=update))  # mid-way between two points: the old one stands
    update["compaction_point_tokens"] = learned
    if moved or announced is None:
        low, high = move_band(learned)
        update |= {"band_low_tokens": low, "band_high_tokens": high}
    if moved:
        # The evidence of the new point: the kept samples inside its band (the latest ones are, `_settled`); those
        # of the old point are not.
        behind = [s for s in samples if low <= s.tokens_before <= high]
        update |= {
            "compactions": len(behind),
            "since": min(s.completed_at for s in behind),
            "previous_point_tokens": announced if announced is not None else default_point,
            "moved_at": compaction.completed_at,
            "moves": current.moves + 1,
        }
    return Learned(current.model_copy(update=update), moved)


def bounded_point(samples: list[PointSample], default_point: int, window: int) -> int | None:
    """The robust median of the samples, inside the plausible band around the formula; None below `MIN_SAMPLES`."""
    if len(samples) < MIN_SAMPLES:
        return None
    learned = robust_point([s.tokens_before for s in samples])
    assert learned is not None
    low, high = compaction_band(default_point, window)
    return min(high, max(low, learned))


def _settled(samples: list[PointSample], learned: int) -> bool:
    """The latest `MIN_SAMPLES` compactions agree with a point outside the band: the median of a window holding
    both the old point's samples and the new one's passes through values no thread compacts at."""
    low, high = move_band(learned)
    return all(low <= s.tokens_before <= high for s in samples[-MIN_SAMPLES:])


def move_band(point: int) -> tuple[int, int]:
    spread = round(point * MOVE_FRACTION)
    return point - spread, point + spread


def _centre(point: CompactionPoint) -> int:
    assert point.band_low_tokens is not None
    assert point.band_high_tokens is not None
    return (point.band_low_tokens + point.band_high_tokens) // 2


PointLookup = Callable[[str], CompactionPoint | None]
"""The fleet's learned point of a point key (the `compaction-points` global table's lookup)."""


def no_points(_key: str) -> CompactionPoint | None:
    return None


def thread_key(tool: str, version: str | None, model: str | None, window: int) -> str:
    """The point key of a thread running `tool` at `version` on `model` with `window`."""
    return point_key(tool, version_family(version), model or "", window)


def learned_point(points: PointLookup, key: str) -> int | None:
    """Where a thread of the key compacts, as the fleet learned it; None: the formula's stands."""
    point = points(key)
    return None if point is None else point.compaction_point_tokens


def measured(
    snapshot: ThreadContextSnapshot, points: PointLookup, profiles: ProfileSet = PROFILES
) -> ThreadContextSnapshot:
    """The snapshot with its budget measured against the fleet's point of its key, when it says its tool, tokens and
    window and the key has a point; else as the worker measured it (against its own)."""
    tool, tokens, window = snapshot.agent_tool, snapshot.context_tokens, snapshot.context_window_tokens
    profile = profiles.profiles.get(tool or "")
    if tool is None or tokens is None or window is None or profile is None:
        return snapshot
    point = learned_point(points, thread_key(tool, snapshot.tool_version, snapshot.model, window))
    if point is None:
        return snapshot
    pct = profile.remaining_pct(tokens, window, point=point)
    return snapshot.model_copy(update={"context_budget_remaining_pct": pct})


def describe_move(point: CompactionPoint) -> str:
    """`Claude Code 2.1.x on claude-sonnet-4-5 now compacts at 177k (was 167k, 12 compactions since 14:02)`."""
    assert point.compaction_point_tokens is not None
    assert point.previous_point_tokens is not None
    assert point.since is not None
    tool = " ".join(filter(None, (TOOL_NAMES.get(point.agent_tool, point.agent_tool), point.tool_version)))
    on = f" on {point.model}" if point.model else ""
    return (
        f"{tool}{on} now compacts at {_thousands(point.compaction_point_tokens)} "
        f"(was {_thousands(point.previous_point_tokens)}, {point.compactions} compactions since "
        f"{point.since:%H:%M})"
    )


def moved_events(point: CompactionPoint) -> list[CompactionPointMoved]:
    """The move told to every project whose threads compacted on the key (each one's budgets move with it)."""
    assert point.compaction_point_tokens is not None
    assert point.previous_point_tokens is not None
    assert point.moved_at is not None
    assert point.since is not None
    reason = describe_move(point)
    key_digest = hashlib.blake2b(point.point_key.encode(), digest_size=8).hexdigest()  # a key may hold `/` or spaces
    return [
        CompactionPointMoved(
            event_id=derived_id(project, "point-moved", key_digest, str(point.moves)),
            occurred_at=point.moved_at,
            project_id=project,
            point_key=point.point_key,
            agent_tool=point.agent_tool,
            tool_version=point.tool_version,
            model=point.model,
            context_window_tokens=point.context_window_tokens,
            compaction_point_tokens=point.compaction_point_tokens,
            previous_point_tokens=point.previous_point_tokens,
            compactions=point.compactions,
            since=point.since,
            reason=reason,
        )
        for project in point.project_ids
    ]


def _thousands(tokens: int) -> str:
    return f"{round(tokens / 1000)}k"
