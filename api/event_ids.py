"""SSE event ids: the reader's position in `client-events` on every partition, so `Last-Event-ID` resumes exactly.

An id is `partition:next_offset` pairs joined by commas, e.g. `0:15,1:7,2:0,3:3`: every event of partition p below
next_offset[p] has been sent (or was not the client's to see). One offset could not say where to resume on the other
partitions; the full vector can, after a reconnect to any API process. Heartbeats carry the id too (an SSE message
with an id and no data moves the browser's Last-Event-ID without dispatching an event).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_PARTITIONS = 1024
"""Settings.topic_partitions' bound: a longer id is not one of ours."""
_ID = re.compile(r"\d{1,4}:\d{1,19}(?:,\d{1,4}:\d{1,19}){0,1023}")
MAX_OFFSET = 2**63 - 1


class InvalidEventId(ValueError):
    pass


def encode_event_id(positions: Mapping[int, int]) -> str:
    return ",".join(f"{partition}:{positions[partition]}" for partition in sorted(positions))


def decode_event_id(text: str) -> dict[int, int]:
    if not _ID.fullmatch(text):
        raise InvalidEventId("not a list of partition:offset pairs")
    positions: dict[int, int] = {}
    for pair in text.split(","):
        partition, offset = (int(part) for part in pair.split(":"))
        if partition >= MAX_PARTITIONS or offset > MAX_OFFSET or partition in positions:
            raise InvalidEventId(f"partition {partition} out of range or repeated, or offset too large")
        positions[partition] = offset
    return positions


def resume_positions(last_seen: Mapping[int, int], live: Mapping[int, int]) -> dict[int, int]:
    """Where to read each partition from to send a resuming client everything after `last_seen` up to `live`.

    A partition the id does not name (the topic grew since) is read from its start; an id ahead of the live position
    (the topic was re-created) reads nothing from the past.
    """
    return {partition: min(last_seen.get(partition, 0), end) for partition, end in live.items()}
