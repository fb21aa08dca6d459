"""A correction to faust-streaming 0.15.3's choice of which input offset to commit.

`Consumer._new_offset` must never commit past a record that was not acknowledged. Upstream checks the gap at the
head of the acknowledged offsets with `min(acked) - committed > 1`, where `committed` is the next offset to read, so
one unacknowledged record right at the committed position is skipped; and it skips the check entirely while the
committed offset is 0. A record in flight across a rebalance is exactly such a record: its offset got committed
without it ever being applied. This replacement keeps upstream's behaviour otherwise (gaps left by compaction or
transaction markers still count as acknowledged).
"""

from __future__ import annotations

from faust.transport.consumer import Consumer
from faust.types import TP
from faust.utils.functional import consecutive_numbers


def _new_offset(self: Consumer, tp: TP) -> int | None:
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
    acked.sort()
    committed = self._committed_offset[tp]  # the next offset to read, or None before the first commit
    if committed is not None and acked[0] > committed:
        return None  # the record at `committed` is not acknowledged yet
    batch = next(consecutive_numbers(acked))
    acked[: len(batch)] = []
    self._acked_index[tp].difference_update(batch)
    return batch[-1] + 1


def apply() -> None:
    Consumer._new_offset = _new_offset  # type: ignore[method-assign]
