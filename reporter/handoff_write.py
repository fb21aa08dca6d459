"""`ctxbudget handoff write --thread T`: the agent's part on stdin, the worker's facts from git, one package posted.

The agent runs it when a hook tells it to (reporter/hook_actions.py), in its own working directory. Its part
(`reporter.agent_handoff.AgentHandoff`, JSON on stdin) and the git facts of that directory make the package, which
goes out `draft`, then `ready` once it meets the engine's rule. What the API does not take now stays in this command's
own outbox beside the reporter's spool (`handoff_write_outbox.jsonl`; a running reporter writes its own, so two
processes never rewrite one file) and goes out first on the next run, so nothing the agent wrote is lost. The agent's
part is also left in the relay's inbox (`agent_handoffs/<thread>.json`), where a reporter waiting on that thread's
agent (`InboxAsker`, for Claude Code, whose agent the reporter cannot ask itself) finds its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from reporter.agent_handoff import AgentHandoff
from reporter.atomic_file import write_atomically
from reporter.handoff_assembly import assemble, gather, promote
from reporter.readings import Identity
from reporter.relay_outbox import OUTBOX_NAME, Owed, RelayDeliverer, RelayOutbox
from schemas import HandoffPackage, MasterAction

INBOX_NAME = "agent_handoffs"
WRITE_OUTBOX_NAME = "handoff_write_outbox.jsonl"
REJECTED_NAME = "rejected.jsonl"
INBOX_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class RelayPaths:
    """Where the relay keeps its files: beside the reporter's spool."""

    spool_dir: Path

    def outbox(self, name: str = OUTBOX_NAME) -> RelayOutbox:
        return RelayOutbox(self.spool_dir / name, self.spool_dir / REJECTED_NAME)

    @property
    def patches(self) -> Path:
        return self.spool_dir / "patches"

    def inbox(self, thread_id: str) -> Path:
        safe = hashlib.sha256(thread_id.encode()).hexdigest()[:32]
        return self.spool_dir / INBOX_NAME / f"{safe}.json"


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
    write_atomically(paths.inbox(thread_id), agent.model_dump_json().encode())
    draft, ready = written_package(agent, identity, thread_id, cwd, since, paths, now)
    outbox = paths.outbox(WRITE_OUTBOX_NAME)
    outbox.add(Owed.of_package(draft), *([Owed.of_package(ready)] if ready else []))
    await outbox.deliver(deliverer)
    return ready or draft, len(outbox)


class InboxAsker:
    """The relay's `AgentAsker` for an agent it cannot ask itself: its hooks told it to run `handoff write`; the
    answer is the part that command leaves in the inbox after the question was asked."""

    def __init__(self, paths: RelayPaths, poll_seconds: float = INBOX_POLL_SECONDS) -> None:
        self.paths = paths
        self.poll_seconds = poll_seconds

    async def ask(self, thread_id: str, action: MasterAction) -> AgentHandoff | None:
        del action  # the hooks name the action to the agent
        path = self.paths.inbox(thread_id)
        asked = time.time()
        while True:  # the relay bounds the wait (`ask_seconds`)
            with contextlib.suppress(FileNotFoundError, ValidationError):
                if path.stat().st_mtime >= asked:
                    return AgentHandoff.model_validate_json(path.read_bytes())
            await asyncio.sleep(self.poll_seconds)
