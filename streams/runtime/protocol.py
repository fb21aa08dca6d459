"""What a topology declaration needs from a runtime, without Faust: `streams.topology.wire` declares every fold
against this interface, and two runtimes implement it, the Faust one (`streams.runtime.agents.Runtime`, a worker) and
the in-memory one (`streams.runtime.memory.MemoryRuntime`, tests and in-process benchmarks).

Every primitive follows one discipline (`streams.runtime.agents`): records admitted in offset order, the batch's
outputs sent (each to a topic its fold declares, see `UndeclaredOutput`), then its state, then its position reported
to the one ledger that decides what the group commits (`streams.runtime.progress`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from core.folds import Fold
from core.settings import Settings
from streams.batching import BatchResult, Emit, InputMessage

S = TypeVar("S")
V = TypeVar("V")

BatchFn = Callable[[list[InputMessage], Callable[[str], S | None], datetime], BatchResult[S]]
"""A keyed fold's batch: the admitted messages, the lookup of a key's stored state, the batch's instant."""
TickFn = Callable[[Iterable[tuple[str, S]], datetime], BatchResult[S]]
WakeFn = Callable[[S, datetime | None], datetime | None]
"""When the timer must next look at a state: the first instant after the given one (after nothing: any, passed or
not) at which `tick` could change it; None when time alone never will."""
StatelessFn = Callable[[list[InputMessage], datetime], Sequence[Emit]]
"""A fold without a table: the admitted messages and the batch's instant -> the records to publish."""


class UndeclaredOutput(RuntimeError):
    """A fold emitted to a topic its declaration (`core.folds`) does not name.

    Raised before any record of the batch is sent, never dead-lettered: it is a wiring bug, not bad input. The batch
    is then neither published nor reported, so its records are read again instead of committed past, and the agent
    fails loudly instead of writing where the topology says nothing goes (or where no topic may exist)."""

    def __init__(self, fold: Fold, topics: Collection[str]) -> None:
        super().__init__(
            f"fold {fold.name!r} emitted to {', '.join(sorted(topics))}, which it does not declare as an output"
            f" (core/folds.py declares {', '.join(fold.outputs) or 'none'})"
        )
        self.fold = fold
        self.topics = frozenset(topics)


def check_outputs(fold: Fold, emits: Iterable[Emit]) -> None:
    """Refuse the whole batch when one record goes to a topic `fold` does not declare."""
    undeclared = {e.topic for e in emits} - set(fold.outputs)
    if undeclared:
        raise UndeclaredOutput(fold, undeclared)


def check_timer(fold: Fold, tick: object | None) -> None:
    if (tick is not None) != fold.timer:
        raise ValueError(f"fold {fold.name!r}: a timer is {'' if fold.timer else 'not '}declared in core/folds.py")


class PartitionWriter(Protocol):
    """A sink's writer for one input partition (the domain side: batching, writing, resuming)."""

    written_through: int
    """Every offset up to here is written (-1: none)."""

    async def take(self, message: InputMessage) -> None:
        """Add the next record in offset order; may write what is due (advancing `written_through`)."""

    async def flush_due(self) -> None:
        """Write what has waited long enough."""


class SinkWriter(Protocol):
    async def start(self, topic: str, partition: int, committed: int) -> PartitionWriter:
        """The writer of one partition of `topic` (unprefixed) from its committed offset (the first one not known
        written)."""


class FoldRuntime(Protocol):
    """The runtime primitives a topology declaration uses."""

    settings: Settings

    def keyed_fold(
        self,
        fold: Fold,
        decode_state: Callable[[bytes], S],
        batch: BatchFn[S],
        tick: TickFn[S] | None = None,
        census: Callable[[Iterable[S]], None] | None = None,
        wake: WakeFn[S] | None = None,
    ) -> object:
        """`fold` over its inputs (keyed alike) with a table holding one state per key, and its timer when given
        (with `wake`, only over the states whose instant has come)."""

    def stateless_fold(self, fold: Fold, batch: StatelessFn) -> None:
        """`fold` over its inputs, publishing what `batch` emits, with no table (a repartition)."""

    def global_table(
        self, fold: Fold, decode: Callable[[bytes | None], V], key_of: Callable[[V], str]
    ) -> Callable[[str], V | None]:
        """Every record of `fold`'s input, decoded, in one table every worker holds whole; returns the lookup by key.
        A record that does not decode, or whose key is not `key_of` its value, is dead-lettered."""

    def sink(self, fold: Fold, writer: SinkWriter | None) -> None:
        """`fold`'s inputs written by `writer`, a record's position reported once `writer` has written it. Without
        a writer (no store to write to) a worker registers nothing; the in-memory runtime records what it takes."""
