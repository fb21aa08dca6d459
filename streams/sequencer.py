"""Apply each input partition's records in offset order, from the committed offset, with none missing.

The engine's fold is order-sensitive per thread (a snapshot is accepted only when it is newer than the stored one), so
a record applied before an earlier record of its partition makes the earlier one look stale, and it is silently
rejected. Faust's consumer can deliver exactly that around a rebalance: records fetched before a seek keep arriving
after it, records it skipped while flow was suspended are not delivered again (its read-offset filter drops them), and
a re-fetch repeats what was already applied. Kafka Streams avoids this by owning the fetch position; here a sequencer
in front of the fold checks every record against the next offset the partition owes:

- the expected offset: apply it;
- below it: already applied (this generation, or before the committed offset): acknowledge, do not apply again;
- above it: a record is missing in between. Hold it back unacknowledged (so no commit passes the gap) and rewind the
  partition to the missing offset; the re-fetch delivers the gap and everything after it again, in order.

The first expected offset of a partition in a consumer generation is its committed offset (0 when it has none).
Event topics are not compacted and not transactional, so their offsets have no holes; a hole that a rewind cannot
fill (records deleted by retention) is accepted after `max_rewinds` attempts and reported. Compacted topics (latest
state per key) have holes by design: there a later offset is applied at once, since the newest record of a key is
all such a topic promises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
P = TypeVar("P", bound=Hashable)


class Admit(Enum):
    APPLY = "apply"
    DUPLICATE = "duplicate"
    AHEAD = "ahead"


@dataclass
class _Gap:
    offset: int
    """The first offset the partition still owes."""
    held_back: int
    """The highest offset held back since the gap opened."""
    rewinds: int = 0
    last_rewind_at: float | None = None
    exhausted: bool = False
    """Every rewind was tried and waited for: the missing records are gone."""


@dataclass
class Sequencer(Generic[P]):
    """Per-partition expected offsets for one consumer generation. `committed` answers a partition's committed
    offset (the next one to apply) when the generation starts, or None when nothing was ever committed."""

    committed: Callable[[P], int | None]
    compacted: Callable[[P], bool] = lambda _: False
    """Whether the partition's topic is compacted (its holes are records compaction removed)."""
    rewind_interval: float = 2.0
    """Seconds between rewinds of one gap: the re-fetch arrives behind records already queued."""
    max_rewinds: int = 5
    generation: int | None = None
    _next: dict[P, int] = field(default_factory=dict)
    _gaps: dict[P, _Gap] = field(default_factory=dict)

    def start(self, generation: int) -> None:
        """Forget positions when the consumer generation changes: assignments and committed offsets moved."""
        if generation != self.generation:
            self.generation = generation
            self._next.clear()
            self._gaps.clear()

    def admit(self, partition: P, offset: int) -> Admit:
        expected = self._next.get(partition)
        if expected is None:
            expected = self._next[partition] = self.committed(partition) or 0
        if offset < expected:
            return Admit.DUPLICATE
        gap = self._gaps.get(partition)
        if offset > expected and not self.compacted(partition):
            if gap is None:
                gap = self._gaps[partition] = _Gap(expected, held_back=offset)
            gap.held_back = max(gap.held_back, offset)
            if not gap.exhausted:
                return Admit.AHEAD
            log.error("offsets %d..%d of %s never arrived (deleted by retention?)", expected, offset - 1, partition)
        self._next[partition] = offset + 1
        if gap is not None:
            if gap.held_back > offset:  # records past this one were held back: they must be delivered again
                gap.offset, gap.rewinds, gap.exhausted = offset + 1, 0, False
            else:
                del self._gaps[partition]
        return Admit.APPLY

    def rewinds(self, now: float) -> dict[P, int]:
        """Partitions to seek back to their first missing offset, at most once per `rewind_interval` each."""
        due: dict[P, int] = {}
        for partition, gap in self._gaps.items():
            if gap.last_rewind_at is not None and now - gap.last_rewind_at < self.rewind_interval:
                continue
            if gap.rewinds == self.max_rewinds:
                gap.exhausted = True
                continue
            gap.rewinds += 1
            gap.last_rewind_at = now
            due[partition] = gap.offset
        return due
