"""The fleet's compaction points over a batch: finished compactions in (re-keyed by the point they teach), each
point's record out on `compaction-points`, and its move, once, on `client-events` to the projects it concerns."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from core.fleet_points import key_of, learn, moved_events
from core.profiles import ProfileSet
from core.topics import CLIENT_EVENTS, COMPACTION_POINTS, COMPACTION_SAMPLES
from schemas import CompactionFinished, DecodeError
from schemas.codec import Codec
from schemas.compaction_points import CompactionPoint
from streams.batching import BatchResult, Change, Emit, InputMessage, dead_letter, fold_records

COMPACTION_CODEC = Codec(CompactionFinished)
POINT_CODEC = Codec(CompactionPoint)


def route_compactions(messages: Iterable[InputMessage], now: datetime, prefix: str) -> list[Emit]:
    """Each finished compaction that names its tool and window to `compaction-samples` under its point key; one that
    does not decode, dead-lettered. The others teach no point: skipped."""
    emits = []
    for message in messages:
        try:
            compaction = COMPACTION_CODEC.decode(message.value)
        except DecodeError as error:
            emits.append(dead_letter(message, error.reason, error.detail, now, prefix))
            continue
        if (key := key_of(compaction)) is not None:
            emits.append(Emit(COMPACTION_SAMPLES, key, compaction))
    return emits


def points_batch(
    messages: Iterable[InputMessage],
    load: Callable[[str], CompactionPoint | None],
    now: datetime,
    profiles: ProfileSet,
    prefix: str,
) -> BatchResult[CompactionPoint]:
    return fold_records(
        messages,
        load,
        {COMPACTION_SAMPLES: COMPACTION_CODEC},
        key_of=lambda compaction: key_of(compaction) or "",
        apply=lambda state, compaction, _logged_at: apply(state, compaction, profiles),
        now=now,
        prefix=prefix,
    )


def apply(
    state: CompactionPoint | None, compaction: CompactionFinished, profiles: ProfileSet
) -> Change[CompactionPoint]:
    window = compaction.context_window_tokens
    assert window is not None  # routed under `key_of`, which needs it
    profile = profiles.profiles.get(compaction.model_profile or "")
    if profile is None:
        return Change(None, dead_letter=("unknown_profile", f"no profile {compaction.model_profile!r} to learn for"))
    learned = learn(state, compaction, profile.default_point(window))
    if learned.point is None:
        return Change(None)
    point = learned.point
    emits = [Emit(COMPACTION_POINTS, point.point_key, point)]
    if learned.moved:
        emits += [Emit(CLIENT_EVENTS, event.project_id, event) for event in moved_events(point)]
    return Change(point, emits)
