"""What the API knows of each thread, for admitting writes: its project, worker, sources' newest marks, package.

Fed by the engine's own `thread-state` topic (compacted, keyed by thread), read whole at start and followed, plus the
reports this API itself has put on `snapshots` since, which the engine has not folded yet. The topic rather than
ClickHouse's `thread_context_latest`: it is the state the engine judges with (the marks of every source, which the
table does not keep), it is current when the sinks lag or ClickHouse is down, and a report costs no query.

The engine stays the authority (streams.engine.fold.refusal, core.precedence): this book lets the
API refuse a takeover or say "not accepted" at once in the common case, not in a race with the engine.

Consumes: the engine keeps a package's first consume (core.handoff: a finished package is final). The book holds
the consumes this API published until the engine's state shows their package finished, so a second consume into
another thread is refused here at once, before it is published (`reserve` runs without an await after the check),
and a route can wait for the engine's verdict (`finished`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from api.reports import KnownActions
from api.topic_reader import TopicTable
from core.handoff import STATUS_ORDER
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
        self._consumes: dict[str, HandoffPackage] = {}
        """Consumed versions this API published, by package id, until the engine's state shows the package
        finished or no longer its thread's current one."""
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

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
        current = state.handoff
        for package_id, consumed in list(self._consumes.items()):
            if consumed.from_thread_id == state.thread_id and (
                current is None or current.handoff_package_id != package_id or _finished(current)
            ):
                del self._consumes[package_id]
        for waiter in self._waiters.pop(state.thread_id, ()):
            if not waiter.done():
                waiter.set_result(None)
        return True

    def newest(self, package: HandoffPackage) -> HandoffPackage:
        """The package's newest version known here: the engine's once finished, else a consume this API published,
        else `package` (as stored, which may lag behind both)."""
        current = self._current(package)
        if current is not None and _finished(current):
            return current
        return self._consumes.get(package.handoff_package_id) or package

    def reserve(self, consumed: HandoffPackage) -> None:
        """`consumed` is being published: later consumes of its package see it as `newest`."""
        self._consumes[consumed.handoff_package_id] = consumed

    def release(self, consumed: HandoffPackage) -> None:
        """Its publication failed: the package is free again."""
        if self._consumes.get(consumed.handoff_package_id) == consumed:
            del self._consumes[consumed.handoff_package_id]

    async def finished(self, package: HandoffPackage, within: float) -> HandoffPackage | None:
        """The package's finished version once the engine's state shows it (consumed, by whichever consume the
        engine took first, or expired); None when it does not within `within` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while (current := self._current(package)) is None or not _finished(current):
                    waiters = self._waiters.setdefault(package.from_thread_id, set())
                    waiter = asyncio.get_running_loop().create_future()
                    waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        waiters.discard(waiter)
                        if not waiters and self._waiters.get(package.from_thread_id) is waiters:
                            del self._waiters[package.from_thread_id]
                return current
        return None

    def _current(self, package: HandoffPackage) -> HandoffPackage | None:
        """The engine's version of `package`, while it is its thread's current package."""
        known = self._threads.get(package.from_thread_id)
        current = known.handoff if known else None
        return current if current is not None and current.handoff_package_id == package.handoff_package_id else None

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


def _finished(package: HandoffPackage) -> bool:
    return STATUS_ORDER[package.package_status] == 2


def _newer(mark: SourceMark, than: SourceMark | None) -> bool:
    return than is None or (mark.snapshot_version, mark.captured_at) > (than.snapshot_version, than.captured_at)
