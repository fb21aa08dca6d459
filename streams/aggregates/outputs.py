"""What the folds hand back: the state to write, the records to publish, and stable ids for those records."""

from __future__ import annotations

from hashlib import blake2b

from core.topics import (
    CLIENT_EVENTS,
    CONVERSATION_INDICATORS,
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    CONVERSATIONS,
    PROJECT_RISK,
    THREAD_STATE_BY_PROJECT,
)
from schemas.base import MAX_ID_LENGTH
from schemas.projects import ConversationThread
from streams.batching import Change, Emit

__all__ = [
    "CLIENT_EVENTS",
    "CONVERSATIONS",
    "CONVERSATION_INDICATORS",
    "CONVERSATION_LINKS",
    "CONVERSATION_THREADS",
    "PROJECT_RISK",
    "THREAD_STATE_BY_PROJECT",
    "Change",
    "ConversationThread",
    "Emit",
    "stable_id",
]


def stable_id(*parts: str) -> str:
    """An event id built from its cause, so a replayed input repeats the id and consumers drop the repeat.

    Readable when it fits an `Id`; a digest of the same parts otherwise (two 128-character ids do not fit one).
    """
    joined = ":".join(parts)
    if len(joined) <= MAX_ID_LENGTH:
        return joined
    return "h-" + blake2b(joined.encode(), digest_size=24).hexdigest()
