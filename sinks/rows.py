"""Records to ClickHouse rows through one declarative spec per table: its columns, and how each value is read.

A spec lists only the columns the sink writes, in insert order; columns the table declares beyond them take their
defaults (fields a later issue fills). Latest-state tables get the source record's Kafka offset as their `version`
column (see `sinks.tables` for why the offset).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pydantic import BaseModel

from schemas.codec import encode_record

VERSION_COLUMN = "version"

Getter = Callable[[Any], Any]


@dataclass(frozen=True)
class Column:
    name: str
    get: Getter | None = None
    """How to read the value from the record; None reads the attribute of the same name."""

    def getter(self) -> Getter:
        return self.get or attrgetter(self.name)


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    versioned: bool = False
    """A ReplacingMergeTree(version) table: each row ends with the source record's offset."""
    _getters: tuple[Getter, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_getters", tuple(c.getter() for c in self.columns))

    @property
    def column_names(self) -> tuple[str, ...]:
        names = tuple(c.name for c in self.columns)
        return (*names, VERSION_COLUMN) if self.versioned else names

    def row(self, record: Any, offset: int) -> tuple[Any, ...]:
        """The record as a row in `column_names` order."""
        values = tuple(get(record) for get in self._getters)
        return (*values, offset) if self.versioned else values


def columns(*names: str, **computed: Getter) -> tuple[Column, ...]:
    """Columns read from same-named attributes, then computed ones (in keyword order)."""
    return (*(Column(n) for n in names), *(Column(n, g) for n, g in computed.items()))


def optional(name: str) -> Getter:
    """An attribute that only some of the models sharing a table have (absent reads as None)."""
    return lambda record: getattr(record, name, None)


def as_json(name: str | None = None) -> Getter:
    """A nested record (or the record itself) as JSON text, for shapes readers take whole."""
    if name is None:
        return lambda record: encode_record(record).decode()
    return lambda record: _json_of(getattr(record, name))


def _json_of(value: BaseModel | list[BaseModel] | None) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "[" + ",".join(encode_record(v).decode() for v in value) + "]"
    return encode_record(value).decode()
