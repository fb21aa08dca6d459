"""The one codec for Kafka values: JSON bytes through pydantic's own (Rust) serializer and validator.

Records of plain models (fields of JSON scalars, datetimes, enums, lists and other plain models: `plain_model`) are
encoded by msgspec over the models' own `__dict__`, the same bytes pydantic writes at a fraction of its cost on the
hot path; every other model goes through pydantic. No model is described twice: the plan is read off pydantic's.

Every record carries `schema_version`; a record of another version is rejected like any invalid input, with a reason a
dead-letter consumer can group by.
"""

from __future__ import annotations

import types
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

import msgspec
from pydantic import BaseModel, TypeAdapter, ValidationError

T = TypeVar("T")


class DecodeError(ValueError):
    """An input record that is not a valid instance of the expected type."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def describe_errors(error: ValidationError, limit: int = 10) -> str:
    """`field.path: message` for each failing field, the form a producer can act on."""
    parts = []
    for item in error.errors(include_url=False)[:limit]:
        where = ".".join(str(p) for p in item["loc"]) or "<record>"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def _reason(error: ValidationError) -> str:
    kinds = {item["type"] for item in error.errors(include_url=False)}
    if "json_invalid" in kinds or "json_type" in kinds:
        return "invalid_json"
    if any(item["loc"] and item["loc"][-1] == "schema_version" for item in error.errors(include_url=False)):
        return "unsupported_schema_version"
    return "validation_error"


class Codec(Generic[T]):
    """Encodes and decodes one record type (a model, or a discriminated union through its TypeAdapter)."""

    def __init__(self, target: type[T] | TypeAdapter[T]) -> None:
        self._adapter: TypeAdapter[T] = target if isinstance(target, TypeAdapter) else TypeAdapter(target)

    def encode(self, value: T) -> bytes:
        return self._adapter.dump_json(value)

    def decode(self, data: bytes | bytearray | memoryview | None) -> T:
        if data is None:
            raise DecodeError("tombstone", "the record has no value")
        try:
            return self._adapter.validate_json(data)
        except ValidationError as error:
            raise DecodeError(_reason(error), describe_errors(error)) from error


def encode_record(record: BaseModel) -> bytes:
    """JSON bytes of any record of the contract (the same bytes its Codec would produce)."""
    kind = type(record)
    plain = _PLAIN.get(kind)
    if plain is None:
        plain = _PLAIN[kind] = plain_model(kind)
    return _ENCODER.encode(record) if plain else record.__pydantic_serializer__.to_json(record)


def plain_model(model: type[BaseModel]) -> bool:
    """Whether msgspec writes the model's `__dict__` as pydantic serializes it: no serializer, alias, exclusion or
    JSON option of its own, no subclass (pydantic writes a field by its declared class, msgspec by the value's), and
    every field a JSON scalar, an aware-or-not datetime, an enum, or a list, union or plain model of those."""
    return _plain_model(model, set())


def _plain_model(model: type[BaseModel], seen: set[type]) -> bool:
    if model in seen:
        return True
    seen.add(model)
    decorators = model.__pydantic_decorators__
    config = model.model_config
    return (
        not model.__subclasses__()
        and not decorators.field_serializers
        and not decorators.model_serializers
        and not model.__pydantic_computed_fields__
        and config.get("extra") != "allow"
        and not any(key.startswith("ser_json") or key in _SERIALIZING_OPTIONS for key in config)
        and all(
            field.alias is None
            and field.serialization_alias is None
            and not field.exclude
            and _plain_type(field.annotation, seen)
            for field in model.model_fields.values()
        )
    )


_SERIALIZING_OPTIONS = {"alias_generator", "serialize_by_alias", "use_enum_values", "json_encoders"}
_SCALARS = (str, int, float, bool, datetime, type(None))


def _plain_type(annotation: Any, seen: set[type]) -> bool:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _plain_type(args[0], seen)
    if origin is Literal:
        return all(isinstance(arg, str | int) or arg is None for arg in args)
    if origin in (list, Union, types.UnionType):
        return all(_plain_type(arg, seen) for arg in args)
    if annotation in _SCALARS:
        return True
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return all(isinstance(member.value, str | int) for member in annotation)
    return isinstance(annotation, type) and issubclass(annotation, BaseModel) and _plain_model(annotation, seen)


def _fields(value: object) -> dict[str, object]:
    if isinstance(value, BaseModel):
        return value.__dict__
    raise NotImplementedError(f"no JSON form for {type(value).__name__}")


_PLAIN: dict[type[BaseModel], bool] = {}
_ENCODER = msgspec.json.Encoder(enc_hook=_fields)
