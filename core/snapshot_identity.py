"""A snapshot's identity, one derivation for every producer: the reporter's readings and the API's reports without
identity headers (spec 5.1, 5.2).

`snapshot_version = position << RESEND_BITS | resend`: `position` grows with the source, per thread and source kind,
and `resend` counts the cadence re-sends of one reading, so a re-send is newer than its reading and older than the
next one. `snapshot_id` hashes thread, source kind, version and `captured_at` only, so the same reading sent again
carries the same id and version and the engine drops it; a re-send, stamped with the time it is sent, has its own id.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from schemas import SourceKind
from schemas.admission import RESEND_BITS  # re-sends one reading's version tells apart; the receivers bound it too

MAX_RESEND = (1 << RESEND_BITS) - 1


def snapshot_version(position: int, resend: int = 0) -> int:
    if not 0 <= resend <= MAX_RESEND:
        raise ValueError(f"resend {resend} outside 0..{MAX_RESEND}")
    return position << RESEND_BITS | resend


def snapshot_id(thread_id: str, source_kind: SourceKind, version: int, captured_at: datetime) -> str:
    digest = hashlib.sha256(f"{source_kind.value}|{thread_id}|{version}|{captured_at.isoformat()}".encode()).hexdigest()
    return f"snap-{digest[:32]}"
