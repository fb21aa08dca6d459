"""Records to ClickHouse rows through one declarative spec per table: its columns, and how each value is read.

A spec lists only the columns the sink writes, in insert order; columns the table declares beyond them take their
defaults (fields a later issue fills). A table that stores a model takes its columns from the model's fields
(`stored`): a field added to the model is a column at once, and tests/unit/sinks/test_columns.py fails until a
migration adds it to the table. Latest-state tables get the source record's Kafka offset as their `version`
column (see `sinks.tables` for why the offset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


def stored(model: type[BaseModel], *, key: str, skip: Iterable[str] = (), **computed: Getter) -> tuple[Column, ...]:
    """The columns of a table storing `model`: `key` first, then every other field of the model in its order, read
    from the same-named attribute, but those in `skip` (stored by a computed column, or not at all: each table says
    why); then the `computed` ones, in keyword order (one named like a field replaces how that field is read)."""
    fields = model.model_fields
    unknown = [name for name in (key, *skip) if name not in fields]
    if unknown:
        raise ValueError(f"{model.__name__} has no field {', '.join(unknown)}")
    names = [key, *(name for name in fields if name != key and name not in skip and name not in computed)]
    return columns(*names, **computed)


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
