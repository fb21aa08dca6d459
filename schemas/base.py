"""Shared building blocks of every record: strict scalar types, bounded strings, aware timestamps, schema_version.

Strict means no silent coercion: `"37"` is not a percent, `"true"` is not a boolean, `1` is not a timestamp, and a
timestamp without an offset is rejected (a naive time is ambiguous across worker machines). Enum fields accept their
exact string value (or the enum member from Python) and nothing else. Unknown fields are rejected, so a misspelt
contract field fails loudly instead of being dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, Strict, StringConstraints

SCHEMA_VERSION: Literal[1] = 1
"""Version of the wire format of every record. Bump on an incompatible change; consumers reject versions they lack."""

MAX_ID_LENGTH = 128
MAX_NAME_LENGTH = 256
MAX_SHORT_TEXT_LENGTH = 4_096
MAX_LONG_TEXT_LENGTH = 65_536
"""Summaries, handoff text, compaction summaries."""
MAX_SURFACE_TEXT_LENGTH = 200_000
"""One message or tool result carried as text; larger content is sent as a token count instead. At most 4 bytes a
character, the record stays under Kafka's default 1 MB message limit."""
MAX_LIST_ITEMS = 1_000
MAX_TOKENS = 100_000_000

ID_PATTERN = r"^[^\s/\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"
"""No whitespace, no `/`, no control character (C0, DEL, C1), no bidirectional control. An id travels in URL paths
(`/threads/{id}`: one with `/` is stored but no route reaches it) and is shown in pages, logs and prompts (a control
or a U+202E override makes it print as another id)."""
ID_RULE = "1-128 characters: no whitespace, '/', control or bidirectional-control character"
Id = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
"""An entity id: 1-128 characters of ID_PATTERN."""
Name = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_NAME_LENGTH)]
ShortText = Annotated[str, Strict(), StringConstraints(max_length=MAX_SHORT_TEXT_LENGTH)]
LongText = Annotated[str, Strict(), StringConstraints(max_length=MAX_LONG_TEXT_LENGTH)]
SurfaceText = Annotated[str, Strict(), StringConstraints(max_length=MAX_SURFACE_TEXT_LENGTH)]
Timestamp = Annotated[datetime, Strict(), AwareDatetime]
"""A timezone-aware instant (ISO 8601 with an offset on the wire)."""
Flag = Annotated[bool, Strict()]
Percent = Annotated[float, Strict(), Field(ge=0, le=100, allow_inf_nan=False)]
TokenCount = Annotated[int, Strict(), Field(ge=0, le=MAX_TOKENS)]
Count = Annotated[int, Strict(), Field(ge=0, le=1_000_000_000)]
Version = Annotated[int, Strict(), Field(ge=0, le=2**53)]
"""A monotonic version (e.g. epoch milliseconds); bounded to integers exact in every JSON implementation."""
Seconds = Annotated[int, Strict(), Field(ge=1, le=86_400)]
TextList = Annotated[list[ShortText], Field(max_length=MAX_LIST_ITEMS)]
"""A bounded list of short texts (file paths, commands, links, questions)."""
IdList = Annotated[list[Id], Field(max_length=MAX_LIST_ITEMS)]


class Record(BaseModel):
    """Base of every model in the contract: closed, immutable, versioned."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    schema_version: Literal[1] = Field(
        default=SCHEMA_VERSION, description="Wire-format version of this record; consumers reject unknown versions."
    )
