"""What the API knows of each thread, for admitting writes: its project, worker, sources' newest marks, package.

Fed by the engine's own `thread-state` topic (compacted, keyed by thread), read whole at start and followed, plus the
reports this API itself has put on `snapshots` since, which the engine has not folded yet. The topic rather than
ClickHouse's `thread_context_latest`: it is the state the engine judges with (the marks of every source, which the
table does not keep), it is current when the sinks lag or ClickHouse is down, and a report costs no query.

The engine stays the authority (streams.engine.fold.project_conflict, core.precedence): this book lets the
API refuse a takeover or say "not accepted" at once in the common case, not in a race with the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.reports import KnownActions
from api.topic_reader import TopicTable
from core.precedence import Verdict, judge, record_mark
from schemas import Codec, DecodeError, HandoffPackage, SourceKind, ThreadContextSnapshot
from schemas.state import SourceMark, ThreadState

STATE_CODEC = Codec(ThreadState)


@dataclass(frozen=True)
class KnownThread:
    """A thread as far as admission needs it (a few fields of `ThreadState`, so the book stays small)."""

    project_id: str
    worker_id: str
    source_kind: SourceKind
    stale: bool
    sources: list[SourceMark]
    handoff: HandoffPackage | None = None
    actions: KnownActions | None = None
    """The engine's master actions of the thread's current cycle, for the 5.2 answer to list only open ones."""


class ThreadBook(TopicTable):
    def __init__(self) -> None:
        self._threads: dict[str, KnownThread] = {}

    def known(self, thread_id: str) -> KnownThread | None:
        return self._threads.get(thread_id)

    def apply(self, key: bytes | None, value: bytes | None) -> bool:
        """One `thread-state` record; the engine's marks are merged with those of reports not folded yet."""
        try:
            state = STATE_CODEC.decode(value)
        except DecodeError:
            return False
        if key != state.thread_id.encode():
            return False
        sources = state.sources
        pending = self._threads.get(state.thread_id)
        for mark in pending.sources if pending else ():
            if _newer(mark, next((m for m in sources if m.source_kind == mark.source_kind), None)):
                sources = [m for m in sources if m.source_kind != mark.source_kind] + [mark]
        self._threads[state.thread_id] = KnownThread(
            state.project_id,
            state.worker_id,
            state.source_kind,
            state.stale,
            sources,
            state.handoff,
            KnownActions(state.compaction_count, state.master_actions),
        )
        return True

    def actions(self, thread_id: str) -> KnownActions | None:
        known = self._threads.get(thread_id)
        return known.actions if known else None

    def verdict(self, snapshot: ThreadContextSnapshot) -> Verdict:
        """What the engine will make of `snapshot` as far as this book knows (ACCEPT for an unknown thread)."""
        return judge(snapshot, self._threads.get(snapshot.thread_id))

    def published(self, snapshot: ThreadContextSnapshot) -> None:
        """`snapshot` is on `snapshots`: its thread belongs to its project, and its mark is its source's newest."""
        known = self._threads.get(snapshot.thread_id)
        if known is None:
            known = KnownThread(snapshot.project_id, snapshot.worker_id, snapshot.source_kind, False, [])
        elif self.verdict(snapshot) is not Verdict.ACCEPT:
            return
        marks = record_mark(known.sources, snapshot)
        self._threads[snapshot.thread_id] = KnownThread(
            known.project_id, known.worker_id, snapshot.source_kind, False, marks, known.handoff, known.actions
        )


def _newer(mark: SourceMark, than: SourceMark | None) -> bool:
    return than is None or (mark.snapshot_version, mark.captured_at) > (than.snapshot_version, than.captured_at)
