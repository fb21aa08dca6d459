"""Copies of records with some fields replaced, as `model_copy(update=...)` makes them, at less cost on the hot path.

The fold derives every state and record by copying the last with a few fields changed, several times per input.
`model_copy` goes through `__copy__`, which copies the field values' dict, the fields-set, the extra fields and the
private attributes each through `copy.copy`, and then through branches for deep copies and extra fields, none of which
a record of the contract has (closed, no private attributes). `replaced` writes the one new dict and fields-set.

Like `model_copy`, it validates nothing: the values are the fold's own. (Checking them in Python first, to skip the
validating constructor elsewhere, costs more than that constructor: building an instance from Python alone takes about
as long as pydantic's validator building and checking one.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__  # pydantic's records are frozen: their slots are written past __setattr__, as pydantic does


def replaced(record: M, update: Mapping[str, Any]) -> M:
    """`record.model_copy(update=update)`: the same fields, fields-set and type."""
    if record.__pydantic_extra__ is not None or record.__pydantic_private__ is not None:
        return record.model_copy(update=update)
    model = type(record)
    copied = model.__new__(model)
    _set(copied, "__dict__", {**record.__dict__, **update})
    _set(copied, "__pydantic_fields_set__", record.__pydantic_fields_set__ | update.keys())
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_private__", None)
    return copied
