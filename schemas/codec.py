"""The one codec for Kafka values: JSON bytes through pydantic's own (Rust) serializer and validator.

Every record carries `schema_version`; a record of another version is rejected like any invalid input, with a reason a
dead-letter consumer can group by.
"""

from __future__ import annotations

from typing import Generic, TypeVar

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
    return record.__pydantic_serializer__.to_json(record)
