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
- on a compacted topic (latest state per key) a jump is usually a hole compaction left, but may just as well be
  records the consumer dropped. The caller surveys the partition on the broker (`surveys_due`, `surveyed`: which
  offsets exist from the gap on); a jump over offsets the survey shows missing is applied at once, any other jump
  is a gap like above.

A record the consumer fetched but never delivered leaves no later record to reveal the gap: Faust drops fetched
records without seeking back when flow stops or the generation changes mid-batch, and records of a partition not yet
in its active set, and the fetch position has already moved past them. So `stalls` also watches each owned partition
against its end offset: one that owes records and has not advanced for `stall_seconds` is rewound to its next
offset too. (A rewind that was not needed only re-delivers records the sequencer then drops as duplicates.)

The first expected offset of a partition in a consumer generation is its committed offset (0 when it has none).
Event topics are not compacted and not transactional, so their offsets have no holes; a hole that a rewind cannot
fill (records deleted by retention) is accepted after `max_rewinds` attempts and reported.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping
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


@dataclass(frozen=True)
class Survey:
    """The offsets of a compacted partition that exist from `first` through `last`, read from the broker."""

    first: int
    last: int
    existing: tuple[int, ...]
    """Sorted."""

    def hole(self, start: int, end: int) -> bool | None:
        """Whether no record exists at offsets start..end-1; None when the survey does not cover them."""
        if start < self.first or end - 1 > self.last:
            return None
        index = bisect_left(self.existing, start)
        return index == len(self.existing) or self.existing[index] >= end


@dataclass(frozen=True)
class _Watch:
    expected: int
    since: float
    """When the partition last advanced (or was first seen owing records)."""


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
    stall_seconds: float = 5.0
    """How long a partition that owes records may go without advancing before it is rewound."""
    generation: int | None = None
    _next: dict[P, int] = field(default_factory=dict)
    _gaps: dict[P, _Gap] = field(default_factory=dict)
    _watches: dict[P, _Watch] = field(default_factory=dict)
    _surveys: dict[P, Survey] = field(default_factory=dict)

    def start(self, generation: int) -> None:
        """Forget positions when the consumer generation changes: assignments and committed offsets moved."""
        if generation != self.generation:
            self.generation = generation
            self._next.clear()
            self._gaps.clear()
            self._watches.clear()
            self._surveys.clear()

    def expected(self, partition: P) -> int:
        """The next offset the partition owes (its committed offset until it starts in this generation)."""
        expected = self._next.get(partition)
        return expected if expected is not None else self.committed(partition) or 0

    def admit(self, partition: P, offset: int) -> Admit:
        expected = self._next[partition] = self.expected(partition)
        if offset < expected:
            return Admit.DUPLICATE
        gap = self._gaps.get(partition)
        if offset > expected and not self._known_hole(partition, expected, offset):
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

    def _known_hole(self, partition: P, start: int, end: int) -> bool:
        survey = self._surveys.get(partition)
        return self.compacted(partition) and survey is not None and survey.hole(start, end) is True

    def surveys_due(self) -> dict[P, tuple[int, int]]:
        """Compacted partitions with a gap no survey covers: (first missing offset, highest offset held back)."""
        due: dict[P, tuple[int, int]] = {}
        for partition, gap in self._gaps.items():
            survey = self._surveys.get(partition)
            if self.compacted(partition) and (survey is None or survey.hole(gap.offset, gap.held_back) is None):
                due[partition] = (gap.offset, gap.held_back)
        return due

    def surveyed(self, partition: P, survey: Survey) -> None:
        self._surveys[partition] = survey

    def rewinds(self, now: float) -> dict[P, int]:
        """Partitions to seek back to their first missing offset, at most once per `rewind_interval` each (a
        compacted one only once a survey covers its gap)."""
        due: dict[P, int] = {}
        surveying = self.surveys_due()
        for partition, gap in self._gaps.items():
            if partition in surveying:
                continue
            if gap.last_rewind_at is not None and now - gap.last_rewind_at < self.rewind_interval:
                continue
            if gap.rewinds == self.max_rewinds:
                gap.exhausted = True
                continue
            gap.rewinds += 1
            gap.last_rewind_at = now
            due[partition] = gap.offset
        return due

    def stalls(self, now: float, ends: Mapping[P, int]) -> dict[P, int]:
        """Partitions (of `ends`, each owned partition's end offset) that owe records and have not advanced for
        `stall_seconds`, with the offset to rewind them to. Partitions with a known gap are left to `rewinds`."""
        due: dict[P, int] = {}
        watches: dict[P, _Watch] = {}
        for partition, end in ends.items():
            expected = self.expected(partition)
            if expected >= end or partition in self._gaps:
                continue
            watch = self._watches.get(partition)
            if watch is None or watch.expected != expected:
                watch = _Watch(expected, now)
            elif now - watch.since >= self.stall_seconds:
                log.warning("%s owes offsets %d..%d and stalled: rewinding", partition, expected, end - 1)
                due[partition] = expected
                watch = _Watch(expected, now)
            watches[partition] = watch
        self._watches = watches
        return due
