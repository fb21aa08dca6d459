"""A global table mirrored in a plain map of decoded values that the folds' hot path reads (the policies').

A read through a Faust table passes its sensors and its store's key and value encoding on every record (twice when a
project has no policy of its own and the `*` default is looked up too); the mirror is a dict. Both of the table's
writers keep it current: the runtime's agent for the table (`put`, `Runtime.global_table`) and Faust's changelog
reader (recovery at start, then the records other workers store), through `apply_changelog_batch`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import faust
from faust.types import TP


class MirroredTable(faust.GlobalTable):
    def __init__(self, *args: Any, decode: Callable[[bytes | None], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decode = decode
        self.mirror: dict[str, Any] = {}
        """Key -> its value, decoded as stored (validated before it was)."""

    @classmethod
    def register(
        cls, app: faust.App, name: str, partitions: int, decode: Callable[[bytes | None], Any], **kwargs: Any
    ) -> MirroredTable:
        """As `app.GlobalTable` would (standby changes applied as they come), with this class."""
        table = cls(app, name=name, default=None, beacon=app.tables.beacon, partitions=partitions,
                    standby_buffer_size=1, is_global=True, decode=decode, **kwargs)  # fmt: skip
        app.tables.add(table)
        return table

    def put(self, key: bytes, value: bytes) -> None:
        """Store a validated value once its changelog record is in Kafka."""
        self.data[key] = value
        self._mirror(key, value)

    def apply_changelog_batch(self, batch: Iterable[faust.EventT]) -> None:
        events = list(batch)
        super().apply_changelog_batch(events)
        for key in {event.message.key for event in events}:
            self._mirror(key, self.data.get(key))  # what the store holds now: the batch's last word on the key

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        held = {key.decode() for key in self.data}  # the store may let go of keys here, past `_mirror`
        for key in self.mirror.keys() - held:
            del self.mirror[key]

    def _mirror(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.mirror.pop(key.decode(), None)
        else:
            self.mirror[key.decode()] = self.decode(value)
