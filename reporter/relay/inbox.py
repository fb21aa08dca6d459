"""The agents' parts of their handoffs, kept where the relay finds them (`<state dir>/agent_handoffs/`).

`ctxbudget handoff write` leaves the part there with when it was written and the thread's compaction cycle as the API
reported it. The relay assembles every later package of that cycle with it (facts merged into the agent's part, never
a facts-only package in its place); a part of an earlier cycle (written before the thread's last compaction) no
longer counts. One file per thread, replaced whole (the latest part of a thread is the one that counts).
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from reporter.atomic_file import write_atomically
from reporter.relay.agent_handoff import AgentHandoff


@dataclass(frozen=True)
class ThreadCycle:
    """A thread's compaction cycle as the API reports it (a new one begins at each compaction)."""

    compaction_count: int
    last_compaction_at: datetime | None = None


def cycle_of(detail: dict[str, Any]) -> ThreadCycle:
    """From the 6.3 detail (`GET /api/v1/threads/{id}/context-budget`)."""
    last = detail.get("last_compaction_at")
    return ThreadCycle(int(detail.get("compaction_count") or 0), datetime.fromisoformat(last) if last else None)


class InboxEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: AgentHandoff
    written_at: datetime
    compaction_count: int | None = None
    """The thread's compaction count when the part was written, as the API reported it; None: not known then."""

    def of_cycle(self, cycle: ThreadCycle | None, since: datetime) -> bool:
        """Whether the part belongs to the thread's current `cycle`. Unknown cycles fall back on times: written since
        the last compaction, or (no cycle known at all) since `since`, when the open wrap-up was issued."""
        if cycle is None:
            return self.written_at >= since
        if self.compaction_count is not None:
            return self.compaction_count == cycle.compaction_count
        return cycle.last_compaction_at is None or self.written_at >= cycle.last_compaction_at


class AgentInbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, thread_id: str) -> Path:
        return self.directory / f"{hashlib.sha256(thread_id.encode()).hexdigest()[:32]}.json"

    def write(self, thread_id: str, entry: InboxEntry) -> None:
        write_atomically(self.path(thread_id), entry.model_dump_json().encode())

    def read(self, thread_id: str) -> InboxEntry | None:
        """The thread's latest part; None when there is none (or it is unreadable: the relay then asks again)."""
        with contextlib.suppress(OSError, ValidationError):
            return InboxEntry.model_validate_json(self.path(thread_id).read_bytes())
        return None

    def part(self, thread_id: str, cycle: ThreadCycle | None, since: datetime) -> AgentHandoff | None:
        """The agent's part of the thread's current cycle, if it wrote one."""
        entry = self.read(thread_id)
        return entry.agent if entry is not None and entry.of_cycle(cycle, since) else None
