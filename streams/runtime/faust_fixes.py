"""Corrections to faust-streaming 0.15.3's at-least-once bookkeeping: never commit past a record not applied.

1. `Consumer._new_offset` must never commit past a record that was not acknowledged. Upstream checks the gap at the
   head of the acknowledged offsets with `min(acked) - committed > 1`, where `committed` is the next offset to read,
   so one unacknowledged record right at the committed position is skipped; and it skips the check entirely while the
   committed offset is 0. The replacement keeps upstream's behaviour otherwise (gaps left by compaction or
   transaction markers still count as acknowledged).

2. `Stream.__aiter__` *skips* a record it dequeues while flow control is suspended (a rebalance is under way) or
   whose fetch generation is older than the consumer's, and then acknowledges it "so the lag does not grow". The
   skipped record never reached an agent, yet its offset becomes committable: a record delivered by the fetcher just
   after a revocation began was committed in the revocation's final commit and never applied by any worker. Skipped
   records are exactly the ones the stream never started tracking (it marks a record tracked only once it passes the
   check), so `Consumer.ack` now ignores untracked records; the seek to the committed offset after the rebalance
   delivers them again.

3. `Consumer.wait_empty` (run by every revocation) waits, without a limit, until every tracked record is
   acknowledged by every agent that received it. A record two agents share (session-events: projection and engine;
   thread-state: projection and routes) keeps one reference for ever once the revocation's flow-control clear drops
   the copy still queued for one of them, so the revocation never ended and the worker stalled. The wait is now
   bounded: what is still unacknowledged after `WAIT_EMPTY_SECONDS` is not committed (the seek that ends the
   rebalance delivers it again), and the rebalance goes on.

4. Faust counts a jump between two records it reads of a partition as a gap left by compaction, and those offsets as
   acknowledged. After a seek back (streams/runtime/sequencer.py rewinds) a record fetched before the seek still arrives
   behind it, and the jump it makes is no compaction: its offsets were not applied. Such gaps are now kept only for
   compacted topics (`apply(compacted=...)`). And the acknowledged offsets are kept free of repeats: a gap-filled
   offset acknowledged again stalled commits to one offset per commit interval.

5. For the topics our agents read through `streams.runtime.intake.OrderedIntake`, the commit is not counted from
   acknowledgements at all but from the positions each reader reports (`streams.runtime.progress`); `track_progress`
   attaches that to an app (a hole the sequencer gives up on is then passed by its report, no gap needed).
   Acknowledgements still end Faust's wait for in-flight records before a rebalance.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Collection, Iterator
from weakref import WeakKeyDictionary

import faust
from faust.transport.consumer import Consumer
from faust.types import TP, Message
from faust.utils.functional import consecutive_numbers

from streams.runtime.progress import Progress

UPSTREAM = {
    name: getattr(Consumer, name)
    for name in ("_add_gap", "_new_offset", "_filter_tps_with_pending_acks", "ack", "wait_empty")
}
"""The consumer's methods as Faust ships them: each correction calls on its own, and its test runs the same scenario
against both (tests/unit/runtime/test_faust_fixes.py), showing the upstream one misbehave."""
_upstream_ack = UPSTREAM["ack"]
_upstream_pending = UPSTREAM["_filter_tps_with_pending_acks"]
_upstream_add_gap = UPSTREAM["_add_gap"]
_PROGRESS: WeakKeyDictionary[faust.App, Progress[TP]] = WeakKeyDictionary()
_COMPACTED: set[str] = set()
"""Topics of every app in this process whose offsets have holes by design (names are prefixed, so apps do not clash)."""
WAIT_EMPTY_SECONDS = 5.0
"""Half the session timeout: a batch in flight finishes within it; a dangling reference never does."""
log = logging.getLogger(__name__)


def track_progress(app: faust.App) -> Progress[TP]:
    """The reported positions that `app`'s consumer commits for the topics registered with them."""
    return _PROGRESS.setdefault(app, Progress(topic_of=lambda tp: tp.topic))


def _pending(self: Consumer, topics: object = None) -> Iterator[TP]:
    progress = _PROGRESS.get(self.app)
    reported = progress.partitions() if progress is not None else ()
    upstream = _upstream_pending(self, topics)
    return iter({*upstream, *(tp for tp in reported if topics is None or tp in topics or tp.topic in topics)})


def _new_offset(self: Consumer, tp: TP) -> int | None:
    progress = _PROGRESS.get(self.app)
    if progress is not None and progress.handles(tp.topic):
        self._acked.pop(tp, None)  # not what commits here; kept from growing
        self._acked_index.pop(tp, None)
        self._gap.pop(tp, None)
        return progress.committable(tp, self.app.consumer_generation_id)
    acked = self._acked[tp]
    if not acked:
        return None
    gap_for_tp = self._gap[tp]
    if gap_for_tp:
        max_offset = max(acked)
        candidates = sorted(gap_for_tp.overlap(0, max_offset), key=lambda interval: interval.begin)
        if candidates:
            filled = [offset for interval in candidates for offset in range(interval.begin, interval.end)]
            acked.extend(filled)
            gap_for_tp.chop(0, max(filled[-1], max_offset + 1))
    committed = self._committed_offset[tp]  # the next offset to read, or None before the first commit
    acked[:] = sorted({offset for offset in acked if committed is None or offset >= committed})
    if not acked or (committed is not None and acked[0] > committed):
        return None  # the record at `committed` is not acknowledged yet
    batch = next(consecutive_numbers(acked))
    acked[: len(batch)] = []
    self._acked_index[tp].difference_update(batch)
    return batch[-1] + 1


def _ack(self: Consumer, message: Message) -> bool:
    if not message.tracked:
        return False  # skipped by the stream, never applied: it must be read again, not committed
    return _upstream_ack(self, message)


async def _add_gap(self: Consumer, tp: TP, offset_from: int, offset_to: int) -> None:
    if tp.topic in _COMPACTED:
        await _upstream_add_gap(self, tp, offset_from, offset_to)


async def _wait_empty(self: Consumer) -> None:
    deadline = time.monotonic() + WAIT_EMPTY_SECONDS
    while not self.should_stop and self._unacked_messages and time.monotonic() < deadline:
        gc.collect()
        await self.commit()
        if not self._unacked_messages:
            break
        await self._wait_for_ack(timeout=1)
        self._clean_unacked_messages()
    if self._unacked_messages:
        log.warning("rebalance goes on: %d records unacknowledged, left uncommitted", len(self._unacked_messages))
        self._unacked_messages.clear()
    await self.commit_and_end_transactions()


PATCHES = {
    "_add_gap": _add_gap,
    "_new_offset": _new_offset,
    "_filter_tps_with_pending_acks": _pending,
    "ack": _ack,
    "wait_empty": _wait_empty,
}


def apply(compacted: Collection[str]) -> None:
    """Patch Faust's consumer; `compacted` names the (prefixed) topics whose offsets have holes by design."""
    _COMPACTED.update(compacted)
    for name, method in PATCHES.items():
        setattr(Consumer, name, method)
