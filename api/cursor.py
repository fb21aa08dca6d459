"""The conversation list's opaque cursor: the sort key of the last item of a page (keyset paging).

Keyset rather than offset paging, so a conversation that moves up while a client pages neither repeats nor pushes
another one off a page boundary. The key is (pin rank, reply rank, conversation_id), ascending: pin rank 0 for
pinned, reply rank the negated latest-reply time in epoch ms (no reply sorts last).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from schemas.base import Id

NO_REPLY_RANK = 2**63 - 1
"""Int64 max: the rank of a conversation without a reply (sorted last)."""
_KEY: TypeAdapter[tuple[Literal[0, 1], int, str]] = TypeAdapter(tuple[Literal[0, 1], int, Id])


class InvalidCursor(ValueError):
    pass


@dataclass(frozen=True)
class SortKey:
    pin_rank: int
    reply_rank: int
    conversation_id: str


def encode_cursor(key: SortKey) -> str:
    raw = _KEY.dump_json((key.pin_rank, key.reply_rank, key.conversation_id))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> SortKey:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        pin_rank, reply_rank, conversation_id = _KEY.validate_json(raw, strict=True)
    except (binascii.Error, ValueError, ValidationError) as error:
        raise InvalidCursor("not a cursor of this API") from error
    if not -NO_REPLY_RANK <= reply_rank <= NO_REPLY_RANK:
        raise InvalidCursor("not a cursor of this API")
    return SortKey(pin_rank, reply_rank, conversation_id)
