"""Which snapshot wins: per-source ordering and duplicates, then source precedence (codex_app_server > codex_sdk >
worker_estimator), where a lower source replaces a higher one only when the higher one has gone stale."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from schemas import SourceKind, ThreadContextSnapshot
from schemas.state import SourceMark

SOURCE_RANK = {SourceKind.CODEX_APP_SERVER: 3, SourceKind.CODEX_SDK: 2, SourceKind.WORKER_ESTIMATOR: 1}


class Verdict(StrEnum):
    ACCEPT = "accept"
    NOT_NEWER = "not_newer"
    """A duplicate or an older snapshot of the same source."""
    SHADOWED = "shadowed"
    """Newer, but from a lower-precedence source while a higher one is fresh."""


def is_newer(snapshot: ThreadContextSnapshot, mark: SourceMark | None) -> bool:
    """Newer than the last snapshot of the same source: by snapshot_version, then captured_at."""
    if mark is None:
        return True
    return (snapshot.snapshot_version, snapshot.captured_at) > (mark.snapshot_version, mark.captured_at)


class Judged(Protocol):
    """What judging needs of a thread (a ThreadState, or the API's smaller copy of it)."""

    @property
    def sources(self) -> Sequence[SourceMark]: ...
    @property
    def source_kind(self) -> SourceKind: ...
    @property
    def stale(self) -> bool: ...


def judge(snapshot: ThreadContextSnapshot, state: Judged | None) -> Verdict:
    if state is None:
        return Verdict.ACCEPT
    mark = next((m for m in state.sources if m.source_kind == snapshot.source_kind), None)
    if not is_newer(snapshot, mark):
        return Verdict.NOT_NEWER
    if SOURCE_RANK[snapshot.source_kind] < SOURCE_RANK[state.source_kind] and not state.stale:
        return Verdict.SHADOWED
    return Verdict.ACCEPT


def record_mark(sources: Sequence[SourceMark], snapshot: ThreadContextSnapshot) -> list[SourceMark]:
    """The per-source marks with this snapshot as its source's newest."""
    mark = SourceMark(
        source_kind=snapshot.source_kind, snapshot_version=snapshot.snapshot_version, captured_at=snapshot.captured_at
    )
    return [m for m in sources if m.source_kind != snapshot.source_kind] + [mark]
