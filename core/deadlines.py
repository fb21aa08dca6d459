"""Which keys are due now: each key's next deadline in a heap, instead of a walk of every state (a fold's timer in
the pipeline, the reporter's cadence on a worker).

A key is indexed with the instant before which time alone cannot change it (`set`); `due` pops the keys whose
instant has passed. Superseded entries stay in the heap until they surface and are skipped there (a key's current
instant is the one in `_next`), so re-indexing a key costs one push.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from datetime import datetime
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class DeadlineIndex(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int, K]] = []
        self._next: dict[K, datetime] = {}
        self._pushed = 0  # breaks ties without comparing keys

    def __len__(self) -> int:
        return len(self._next)

    def set(self, key: K, when: datetime | None) -> None:
        """The key's next deadline; None: nothing will change it by time alone (it leaves the index)."""
        if when is None:
            self._next.pop(key, None)
            return
        if self._next.get(key) == when:
            return
        self._next[key] = when
        self._pushed += 1
        heapq.heappush(self._heap, (when, self._pushed, key))
        if len(self._heap) > 2 * len(self._next) + 64:  # mostly superseded entries: rebuild from the current ones
            self._heap = [(at, i, k) for i, (k, at) in enumerate(self._next.items())]
            heapq.heapify(self._heap)

    def due(self, now: datetime) -> list[K]:
        """The keys whose deadline is at or before `now`, earliest first; they leave the index until `set` again."""
        keys: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, key = heapq.heappop(heap)
            if self._next.get(key) == when:
                del self._next[key]
                keys.append(key)
        return keys

    def earliest(self) -> datetime | None:
        """The first deadline in the index (superseded entries on top are dropped on the way)."""
        heap = self._heap
        while heap and self._next.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def clear(self) -> None:
        self._heap.clear()
        self._next.clear()
