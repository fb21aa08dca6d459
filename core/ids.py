"""Ids of records the pipeline derives from other records' ids, and text it builds from what the inputs carry.

A derived id names its causes (`thread:cause:suffix`), so a replayed input derives the very same id and is dropped
as a repeat. Its parts are ids up to the contract's limit each, so joined they can pass it; `derived_id` keeps such an
id inside the limit, still the same for the same parts and different for different ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from schemas.base import MAX_ID_LENGTH, MAX_LIST_ITEMS, MAX_SHORT_TEXT_LENGTH

_DIGEST_CHARS = 32


def derived_id(*parts: str) -> str:
    """`parts` joined by ':'; past the id limit, its head and a digest of the whole."""
    joined = ":".join(parts)
    if len(joined) <= MAX_ID_LENGTH:
        return joined
    digest = hashlib.blake2b(joined.encode(), digest_size=_DIGEST_CHARS // 2).hexdigest()
    return f"{joined[: MAX_ID_LENGTH - _DIGEST_CHARS - 1]}~{digest}"


def bounded(items: Iterable[str], limit: int = MAX_LIST_ITEMS) -> list[str]:
    """The first `limit` of `items`: a list the contract bounds, merged from several inputs each within the bound."""
    return list(items)[:limit]


def short_text(text: str) -> str:
    """`text` within a short text's limit, its cut marked with an ellipsis."""
    return text if len(text) <= MAX_SHORT_TEXT_LENGTH else text[: MAX_SHORT_TEXT_LENGTH - 1] + "…"
