"""`ctxbudget handoff write --thread T`: the agent's part on stdin, the worker's facts from git, one package posted.

The agent runs it when a hook tells it to (reporter/hooks/actions.py), in its own working directory. Its part
(`reporter.relay.agent_handoff.AgentHandoff`, JSON on stdin) and the git facts of that directory make the package, which
goes out `draft`, then `ready` once it meets the engine's rule. The part is first left in the shared inbox
(reporter.relay.inbox), with the thread's compaction cycle, so that the relay of a running reporter assembles every
later package of the cycle with it. What the API does not take now stays in this command's own outbox
(`<state dir>/handoff-write/`, one run at a time under its lock; a running reporter keeps its own) and goes out first
on the next run, so nothing the agent wrote is lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from reporter.readings import Identity
from reporter.relay.agent_handoff import AgentHandoff
from reporter.relay.assembly import assemble, gather, promote
from reporter.relay.inbox import AgentInbox, InboxEntry, ThreadCycle
from reporter.relay.outbox import OUTBOX_NAME, Owed, RelayDeliverer, RelayOutbox
from reporter.worker_state import INBOX, PATCHES
from schemas import HandoffPackage

WRITE_OUTBOX_NAME = "handoff_write_outbox.jsonl"
REJECTED_NAME = "rejected.jsonl"


@dataclass(frozen=True)
class RelayPaths:
    """Where the relay keeps its files: its outbox in `spool_dir` (the process's own), the agents' parts and the
    pending patches in `shared_dir` (the worker state directory, shared with `handoff write`; default: `spool_dir`)."""

    spool_dir: Path
    shared_dir: Path | None = None

    def outbox(self, name: str = OUTBOX_NAME) -> RelayOutbox:
        return RelayOutbox(self.spool_dir / name, self.spool_dir / REJECTED_NAME)

    @property
    def patches(self) -> Path:
        return (self.shared_dir or self.spool_dir) / PATCHES

    @property
    def inbox(self) -> AgentInbox:
        return AgentInbox((self.shared_dir or self.spool_dir) / INBOX)


def written_package(
    agent: AgentHandoff,
    identity: Identity,
    thread_id: str,
    cwd: Path,
    since: datetime | None,
    paths: RelayPaths,
    now: datetime,
) -> tuple[HandoffPackage, HandoffPackage | None]:
    """The draft and, when it meets the readiness rule, its ready version."""
    facts = gather(cwd, since, paths.patches, thread_id)
    draft = assemble(
        package_id="hp-" + hashlib.sha256(f"{thread_id}|{now.isoformat()}".encode()).hexdigest()[:24],
        project_id=identity.project_id,
        task_id=identity.task_id,
        thread_id=thread_id,
        facts=facts,
        agent=agent,
        latest_messages=(),
        now=now,
    )
    return draft, promote(draft, now)


def leave_part(
    paths: RelayPaths, thread_id: str, agent: AgentHandoff, cycle: ThreadCycle | None, now: datetime
) -> None:
    """The part in the inbox, for the relay, with the cycle it belongs to."""
    count = cycle.compaction_count if cycle is not None else None
    paths.inbox.write(thread_id, InboxEntry(agent=agent, written_at=now, compaction_count=count))


async def write_handoff(
    agent: AgentHandoff,
    identity: Identity,
    thread_id: str,
    cwd: Path,
    since: datetime | None,
    paths: RelayPaths,
    deliverer: RelayDeliverer,
    now: datetime,
) -> tuple[HandoffPackage, int]:
    """Post the package (draft, then ready); returns the last version and how many versions are left owed."""
    draft, ready = written_package(agent, identity, thread_id, cwd, since, paths, now)
    outbox = paths.outbox(WRITE_OUTBOX_NAME)
    outbox.add(Owed.of_package(draft), *([Owed.of_package(ready)] if ready else []))
    await outbox.deliver(deliverer)
    return ready or draft, len(outbox)
