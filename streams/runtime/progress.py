"""What the consumer group may commit: per partition, the lowest position every agent reading it has finished.

Faust commits an offset once every agent that received the record acknowledged it, counted on the record object. Two
agents reading one topic share that object, and the count breaks whenever one of them lets go of its copy without
applying it (held back behind a gap, dropped with a sink's pending batch, cleared by a rebalance) while the other
applies it: the offset was then never committed, or the commit stalled behind it. Kafka Streams and Arroyo commit
positions instead, and so do we: each reader reports, per partition, the offset below which it has applied (or
written) everything in the current consumer generation, and the commit is the minimum over the readers of the topic.
A reader with no report for a partition holds its commit at the committed offset.

This is the one ledger that decides what is committed: every primitive of the runtime reads through
`OrderedIntake` and reports here, the keyed folds and the stateless ones (the alert-command repartition) once their
outputs and states are in Kafka, the global tables (the policies) once their changelog records are, and the sinks once
their writer has written a record. For a topic registered here, Faust's acknowledgements only end its wait for
records in flight before a rebalance (runtime/faust_fixes.py, 5).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)


class Progress(Generic[P]):
    def __init__(self, topic_of: Callable[[P], str]) -> None:
        self.topic_of = topic_of
        self._readers: dict[str, set[str]] = defaultdict(set)
        self._done: dict[tuple[str, P], int] = {}
        self._generation: int | None = None

    def register(self, reader: str, topics: Collection[str]) -> None:
        for topic in topics:
            self._readers[topic].add(reader)

    def handles(self, topic: str) -> bool:
        return topic in self._readers

    def done(self, reader: str, generation: int | None, partition: P, offset: int) -> None:
        """`reader` applied every record of `partition` below `offset` in consumer `generation`."""
        if generation is None or (self._generation is not None and generation < self._generation):
            return  # a batch of an earlier generation finishing late: its partitions may have moved
        if generation != self._generation:
            self._generation = generation
            self._done.clear()
        key = (reader, partition)
        if offset > self._done.get(key, -1):
            self._done[key] = offset

    def committable(self, partition: P, generation: int | None) -> int | None:
        """The offset to commit for `partition`: every reader of its topic is past it. None without a report of each."""
        if generation is None or generation != self._generation:
            return None
        offsets = [self._done.get((reader, partition)) for reader in self._readers[self.topic_of(partition)]]
        if not offsets or any(offset is None for offset in offsets):
            return None
        return min(offset for offset in offsets if offset is not None)

    def partitions(self) -> Iterable[P]:
        """The partitions some reader reported on in the current generation."""
        return {partition for _, partition in self._done}
