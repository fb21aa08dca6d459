"""What a receiver (the API, the engine) admits of a snapshot's own claims about time and order, as pure rules.

`captured_at` must lie near the receiver's clock: a year-9999 snapshot wraps the history TTL and vanishes, a
year-0001 one gets a TTL decades away, and either would sort before or after every real report. The version may not
run ahead of `captured_at` (versions are `position << RESEND_BITS | resend`, a position being a file offset or an
arrival time in epoch ms, see reporter.readings): a version far ahead would make every later report "not newer" and
freeze the thread.
"""

from __future__ import annotations

from datetime import datetime, timedelta

RESEND_BITS = 10
"""The low bits of a snapshot_version that count re-sends of one reading (reporter.readings)."""
MAX_CLOCK_AHEAD = timedelta(minutes=5)
"""How far a worker's clock may run ahead of the receiver's."""
MAX_AGE = timedelta(days=5 * 365)
"""Older than any thread lives; a spooled report delivered days late is still taken."""
MAX_POSITION_LEAD_MS = 60_000
"""How far a version's position may run ahead of captured_at in epoch ms: app-server positions are arrival times,
bumped by one per notification within the same millisecond."""


def captured_at_refusal(captured_at: datetime, now: datetime, name: str = "captured_at") -> str | None:
    """Why `captured_at` (or a session event's `occurred_at`, by `name`) is refused at `now`, or None when admitted."""
    if captured_at > now + MAX_CLOCK_AHEAD:
        return f"{name} {captured_at.isoformat()} is more than {MAX_CLOCK_AHEAD} ahead of the receiver's clock"
    if captured_at < now - MAX_AGE:
        return f"{name} {captured_at.isoformat()} is more than {MAX_AGE.days} days old"
    return None


def max_version(captured_at: datetime) -> int:
    """The largest snapshot_version a snapshot captured at `captured_at` may carry."""
    position = int(captured_at.timestamp() * 1000) + MAX_POSITION_LEAD_MS
    return max(position, 0) << RESEND_BITS | ((1 << RESEND_BITS) - 1)


def version_refusal(version: int, captured_at: datetime) -> str | None:
    """Why `version` is refused for a snapshot captured at `captured_at`, or None."""
    if version > max_version(captured_at):
        return f"snapshot_version {version} is ahead of captured_at {captured_at.isoformat()}"
    return None
