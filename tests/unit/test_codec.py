"""encode_record's fast path writes the very bytes pydantic writes, for random instances of every plain model."""

from __future__ import annotations

import functools
import inspect
import types
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

import schemas
from schemas import DeadLetter, WorkerReportRequest
from schemas.base import Id, Record
from schemas.codec import encode_record, plain_model
from streams.batching import InputMessage, dead_letter
from streams.engine.fold import ThreadSlot

MODELS = sorted(
    {m for m in vars(schemas).values() if inspect.isclass(m) and issubclass(m, BaseModel)} | {ThreadSlot},
    key=lambda m: m.__name__,
)
PLAIN = [m for m in MODELS if plain_model(m)]
NOW = datetime(2026, 1, 1, tzinfo=UTC)

_words = st.text(st.characters(blacklist_categories=("Z", "Cc", "Cs")), min_size=1, max_size=12)
_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_instants = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))]),
)
_floats = st.one_of(st.floats(0, 100, allow_nan=False), st.sampled_from([0.0, 1e-7, 5e-324, 1e16, 37.5]))


def _values(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of one field's type, read off the annotation (the model is its own description)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _values(args[0])
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of([_values(arg) for arg in args])
    if origin is list:
        return st.lists(_values(args[0]), max_size=3)
    if annotation is type(None):
        return st.none()
    if annotation is str:
        return st.one_of(_words, _texts)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.one_of(st.integers(0, 100), st.integers(0, 2**53))
    if annotation is float:
        return _floats
    if annotation is datetime:
        return _instants
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return st.sampled_from(list(annotation))
    assert isinstance(annotation, type), annotation
    assert issubclass(annotation, BaseModel), annotation
    return st.deferred(lambda: instances(annotation))


@functools.cache
def instances(model: type[BaseModel]) -> st.SearchStrategy[BaseModel]:
    fields = {name: _values(field.annotation).filter(_fits(field)) for name, field in model.model_fields.items()}
    required = {name: fields.pop(name) for name, field in model.model_fields.items() if field.is_required()}
    # Required fields always drawn: leaving them to chance rejected nearly every record of the larger models.
    return st.fixed_dictionaries(required, optional=fields).map(_valid(model)).filter(lambda m: m is not None)


def _fits(field: FieldInfo) -> Any:
    """Whether a value meets the field's own constraints (so that whole records are rarely rejected)."""
    adapter = TypeAdapter(Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation)

    def fits(value: Any) -> bool:
        try:
            adapter.validate_python(value)
        except ValidationError:
            return False
        return True

    return fits


def _valid(model: type[BaseModel]) -> Any:
    def build(values: dict[str, Any]) -> BaseModel | None:
        try:
            return model.model_validate(values)
        except ValidationError:
            return None

    return build


@pytest.mark.parametrize("model", PLAIN, ids=lambda m: m.__name__)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_plain_models_encode_to_pydantic_bytes_and_back(model: type[BaseModel], data: st.DataObject) -> None:
    record = data.draw(instances(model))
    encoded = encode_record(record)
    assert encoded == record.__pydantic_serializer__.to_json(record)
    assert model.model_validate_json(encoded) == record


def test_the_hot_records_are_plain() -> None:
    import api.app  # noqa: F401  (the API's models too: a subclass of a record anywhere makes it not plain)

    hot = {"ThreadSlot", "ThreadState", "ContextEvent", "ContextAlert", "MasterActionRecord", "SnapshotVerdict"}
    assert hot | {"ProjectDetail"} <= {m.__name__ for m in MODELS if plain_model(m)}


def test_a_model_pydantic_writes_its_own_way_is_not_plain() -> None:
    class Parent(Record):
        name: Id

    class Child(Parent):  # a Parent field holding a Child: pydantic writes Parent's fields only
        extra: Id

    class Holder(Record):
        parent: Parent

    assert not plain_model(DeadLetter)  # bytes as base64
    assert not plain_model(WorkerReportRequest)  # has a subclass
    assert not plain_model(Holder)
    holder = Holder(parent=Child(name="a", extra="b"))
    assert encode_record(holder) == holder.__pydantic_serializer__.to_json(holder)
    assert b"extra" not in encode_record(holder)
    letter = dead_letter(InputMessage("snapshots", 0, 1, b"k", b"\xff\x00"), "invalid_json", "", NOW, "").record
    assert encode_record(letter) == letter.__pydantic_serializer__.to_json(letter)
