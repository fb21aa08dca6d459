"""Batches of one (topic, partition) for ClickHouse: cut at N records or T ms, each with its deduplication token.

Pure (the clock is injected): the sink agent feeds decoded records in offset order, inserts every batch of a flush,
and only then acknowledges up to the flush's last offset. A batch that is retried, or rebuilt from the same offsets
after a restart, carries the same token, so ClickHouse drops it when it already landed. For the rebuild to be
identical after a crash the cut points must be the same: give the batcher the ranges it planned before (recorded
with `sinks.writer.record_plan`) and it cuts exactly there while replaying them, whatever N and T say.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sinks.rows import TableSpec
from sinks.tables import Route

# ClickHouse's guidance: 10k-100k rows per insert and about one insert per second per table.
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_MS = 1_000


def dedup_token(table: str, topic: str, partition: int, first_offset: int, last_offset: int) -> str:
    return f"{table}:{topic}:{partition}:{first_offset}-{last_offset}"


@dataclass(frozen=True)
class Resume:
    """Where a partition's sink picks up at its committed offset."""

    written_through: int
    """Every offset up to here is in ClickHouse: acknowledge those records without writing them."""
    replay: list[tuple[int, int]]
    """Planned ranges to rebuild exactly (give them to the Batcher as `planned`)."""


def resume(planned: Iterable[tuple[int, int]], committed: int) -> Resume:
    """Split the ranges planned at or after `committed` (from `sinks.writer.planned_ranges`).

    A range that begins before the committed offset was inserted whole: its first record was committed, and a sink
    acknowledges a record only after its whole flush landed. (The commit can stop inside a range when another agent
    reading the same topic has not acknowledged its own share yet.) Rebuilding its tail would carry a new token and
    insert those rows twice; so it counts as written. The other ranges may or may not have landed: rebuilt
    identically, ClickHouse drops the ones it already has.
    """
    ranges = sorted(planned)
    inserted = [last for first, last in ranges if first < committed]
    return Resume(max([committed - 1, *inserted]), [(first, last) for first, last in ranges if first >= committed])


@dataclass(frozen=True)
class Batch:
    table: TableSpec
    rows: list[tuple[Any, ...]]
    token: str


@dataclass(frozen=True)
class Flush:
    """Everything to insert for the offsets first..last of one partition; ack last_offset after all batches landed."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    batches: tuple[Batch, ...]


class Batcher:
    """Accumulates one partition's records into per-table rows (built on arrival, so a flush costs nothing more).

    `topic` is the full topic name (with its prefix): deployments or tests sharing a database never share tokens.
    """

    def __init__(
        self,
        route: Route,
        topic: str,
        partition: int,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_ms: float = DEFAULT_MAX_MS,
        planned: Iterable[tuple[int, int]] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_rows < 1 or max_ms <= 0:
            raise ValueError("max_rows must be >= 1 and max_ms > 0")
        self.route = route
        self.topic = topic
        self.partition = partition
        self.max_rows = max_rows
        self.max_ms = max_ms
        self._clock = clock
        self._planned = sorted(planned)
        self._rows: list[list[tuple[Any, ...]]] = [[] for _ in route.targets]
        self._count = 0
        self._first = self._last = -1
        self._started_ms = 0.0
        self._replay_end: int | None = None

    def add(self, offset: int, record: Any | None) -> list[Flush]:
        """Take the record at `offset`; return the flushes it completes (at most two, when it closes a replay).

        None is a record that writes no rows (it did not decode) but still belongs to the offset range, so the cuts,
        and with them the tokens, stay the same on a rebuild."""
        flushes = []
        if self._replay_end is not None and offset > self._replay_end:
            flushes += self.flush()  # the planned range's last record is gone (compacted): cut where it was
        elif self._count and self._replay_end is None and self._planned and offset >= self._planned[0][0]:
            flushes += self.flush()  # a planned range starts here: it is rebuilt on its own
        if not self._count:
            self._open(offset)
        for rows, target in zip(self._rows, self.route.targets, strict=True):
            value = record if target.extract is None or record is None else target.extract(record)
            if value is not None:
                rows.append(target.table.row(value, offset))
        self._count += 1
        self._last = offset
        if self._replay_end is not None:
            if offset >= self._replay_end:
                flushes += self.flush()
        elif self._count >= self.max_rows:
            flushes += self.flush()
        return flushes

    def due(self) -> list[Flush]:
        """The pending batch, when it has waited max_ms (never in the middle of a replayed range)."""
        if self._count and self._replay_end is None and self._elapsed_ms() >= self.max_ms:
            return self.flush()
        return []

    def flush(self) -> list[Flush]:
        """Whatever is pending, now (on shutdown or revocation)."""
        if not self._count:
            return []
        topic, partition, first, last = self.topic, self.partition, self._first, self._last
        batches = tuple(
            Batch(target.table, rows, dedup_token(target.table.name, topic, partition, first, last))
            for rows, target in zip(self._rows, self.route.targets, strict=True)
            if rows
        )
        self._rows = [[] for _ in self.route.targets]
        self._count = 0
        self._replay_end = None
        return [Flush(topic, partition, first, last, batches)]

    def _open(self, offset: int) -> None:
        self._first = offset
        self._started_ms = self._clock() * 1000
        self._planned = [(first, last) for first, last in self._planned if last >= offset]
        if self._planned and self._planned[0][0] <= offset:
            self._replay_end = self._planned.pop(0)[1]

    def _elapsed_ms(self) -> float:
        return self._clock() * 1000 - self._started_ms
