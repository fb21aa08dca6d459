"""The relay on the worker (spec 1.3, 8.3, 9.5): act on the master actions addressed to this worker's threads.

Actions come from the 5.2 answers (`take_response`) or, for a worker that reports straight to Kafka, from the API's
list (`take_records`). Each new open action is acknowledged. A wrap-up (`prepare_handoff`, `pre_compaction_wrap_up`)
makes the thread's package. The agent's part, once written in a cycle, is in every later package of that cycle (the
engine keeps the newest package, so a facts-only one would displace it):
- the agent's part of the current cycle already in the inbox (`handoff write`, told by the hooks): the package is
  assembled with it and goes out ready at once;
- else a draft from the worker's facts alone goes out at once (a stuck agent still leaves the facts), unless the
  thread holds a ready package that a draft would displace (the relay's own, or one the API shows holding an agent's
  part); then the agent is asked for its part (an `AgentAsker`: the app-server's client), or its part is awaited in
  the inbox, for `ask_seconds`; the package goes out `ready` once it meets the engine's readiness rule, and the
  wrap-up actions are completed;
- an agent that gave no part in time gets a package from facts alone, its summary from the transcript's latest
  assistant messages, marked as such, unless the API shows the thread's ready package holding an agent's part (then
  that one stays).
Everything owed goes through the outbox, so nothing is lost to an unreachable receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from reporter.delivery import DeliveryError, RejectedRecord, RetryDelays
from reporter.git_facts import Checklist
from reporter.readings import Identity
from reporter.relay.agent_handoff import AgentHandoff
from reporter.relay.assembly import assemble, gather, promote
from reporter.relay.inbox import AgentInbox, ThreadCycle
from reporter.relay.outbox import Owed, RelayDeliverer, RelayOutbox
from reporter.relay.resume import resume_prompt
from schemas import (
    HandoffPackage,
    MasterAction,
    MasterActionCommandKind,
    MasterActionItem,
    MasterActionRecord,
    WorkerReportResponse,
)

log = logging.getLogger(__name__)

WRAP_UP = frozenset({MasterAction.PREPARE_HANDOFF, MasterAction.PRE_COMPACTION_WRAP_UP})
"""The actions the worker answers with a package (spec 8.3)."""
DEFAULT_ASK_SECONDS = 120.0
INBOX_POLL_SECONDS = 0.5
RETRY = RetryDelays(base_delay_seconds=1.0, max_delay_seconds=30.0)


class AgentAsker(Protocol):
    async def ask(self, thread_id: str, action: MasterAction) -> AgentHandoff | None:
        """The agent's part of the handoff, or None when it cannot be asked or gave no valid answer."""
        ...


@dataclass(frozen=True)
class ThreadWork:
    """What the reporter knows of a thread's work beside git."""

    cwd: Path | None = None
    began_at: datetime | None = None
    checklist: Checklist = field(default_factory=Checklist)
    latest_messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThreadView:
    """What the API says of a thread when its package is made."""

    cycle: ThreadCycle
    agent_package_ready: bool = False
    """Its current package is ready, of this cycle, and holds an agent's part (not a facts-only one)."""


Look = Callable[[str], Awaitable[ThreadView | None]]
"""The API's view of a thread; None when it cannot say."""


async def no_look(_: str) -> ThreadView | None:
    return None


@dataclass(frozen=True)
class Prepared:
    """A package made for a wrap-up, and how long the wrap-up waited for it."""

    package: HandoffPackage
    issued_at: datetime
    ready_at: datetime | None


def _utc_now() -> datetime:
    return datetime.now(UTC)


def package_id(thread_id: str, action_id: str) -> str:
    """One package per wrap-up: the same action gives the same id, so a repeat is a repeat at the engine too."""
    return "hp-" + hashlib.sha256(f"{thread_id}|{action_id}".encode()).hexdigest()[:24]


def item_of(record: MasterActionRecord) -> MasterActionItem:
    """An action as the API lists it, in the shape the 5.2 answer gives it."""
    return MasterActionItem(
        action_id=record.action_id,
        action=record.actions[0],
        state=record.state,
        context_budget_level=record.context_budget_level,
        issued_at=record.issued_at,
        state_changed_at=record.state_changed_at or record.issued_at,
    )


class Relay:
    def __init__(
        self,
        identity: Identity,
        deliverer: RelayDeliverer,
        outbox: RelayOutbox,
        patch_dir: Path,
        asker: AgentAsker | None = None,
        work_of: Callable[[str], ThreadWork] = lambda _: ThreadWork(),
        clock: Callable[[], datetime] = _utc_now,
        ask_seconds: float = DEFAULT_ASK_SECONDS,
        inbox: AgentInbox | None = None,
        look: Look = no_look,
        inbox_poll_seconds: float = INBOX_POLL_SECONDS,
    ) -> None:
        self.identity = identity
        self.deliverer = deliverer
        self.outbox = outbox
        self.patch_dir = patch_dir
        self.asker = asker
        self.work_of = work_of
        self.clock = clock
        self.ask_seconds = ask_seconds
        self.inbox = inbox
        self.look = look
        self.inbox_poll_seconds = inbox_poll_seconds
        self.prepared: list[Prepared] = []
        self.woken = asyncio.Event()
        self._taken: set[str] = set()
        self._ready: set[str] = set()
        """Threads the relay gave a ready package: a new draft would displace it (the engine keeps the newest)."""
        self._projects: dict[str, str] = {}
        """The project of a thread whose actions the API listed (a worker may report threads of several)."""
        self._due: dict[str, list[MasterActionItem]] = {}

    def take(self, thread_id: str, items: Sequence[MasterActionItem]) -> None:
        """New open actions of a thread: each acknowledged once; a wrap-up makes the thread due for a package."""
        for item in items:
            if not item.open or item.action_id in self._taken:
                continue
            self._taken.add(item.action_id)
            self.outbox.add(Owed.of_command(item.action_id, thread_id, MasterActionCommandKind.ACK))
            if item.action in WRAP_UP:
                self._due.setdefault(thread_id, []).append(item)
            self.woken.set()

    def take_response(self, response: WorkerReportResponse) -> None:
        self.take(response.thread_id, response.open_master_actions)

    def take_records(self, records: Sequence[MasterActionRecord]) -> None:
        for record in records:
            self._projects[record.thread_id] = record.project_id
            self.take(record.thread_id, [item_of(record)])

    @property
    def due(self) -> list[str]:
        return list(self._due)

    async def prepare(self, thread_id: str) -> Prepared | None:
        """The thread's package for its due wrap-ups: with the agent's part of this cycle when there is one, else a
        draft now and the ready version once the agent answered (or could not)."""
        items = self._due.pop(thread_id, [])
        if not items:
            return None
        view = await self._look(thread_id)
        cycle = view.cycle if view else None
        if cycle is not None and cycle.last_compaction_at is not None:
            # a wrap-up issued before the thread's last compaction was for a cycle that is over (an open one can reach
            # the relay with the first report after the compaction): a package now would hand off the next cycle's
            # work with none of the agent's words, after waiting for a part that the agent wrote for the last one
            items = [item for item in items if item.issued_at >= cycle.last_compaction_at]
            if not items:
                log.info("relay: thread %r compacted since its wrap-up was issued: nothing to hand off", thread_id)
                return None
        issued = min(item.issued_at for item in items)
        work = self.work_of(thread_id)
        created = self.clock()
        facts = await asyncio.to_thread(gather, work.cwd, work.began_at, self.patch_dir, thread_id, work.checklist)
        fields = {
            "package_id": package_id(thread_id, items[0].action_id),
            "project_id": self._projects.get(thread_id, self.identity.project_id),
            "task_id": self.identity.task_id,
            "thread_id": thread_id,
            "facts": facts,
            "now": created,
        }
        draft = assemble(**fields, agent=None, latest_messages=())
        agent = self._written(thread_id, cycle, issued)
        holding = thread_id in self._ready or (view is not None and view.agent_package_ready)
        if agent is None and not holding:  # out before the agent is asked: a stuck agent still leaves the facts
            self.outbox.add(Owed.of_package(draft))
            await self.flush()
        if agent is None:
            agent = await self._ask(thread_id, items[0].action, cycle, issued)
        if agent is None and (later := await self._look(thread_id)) is not None and later.agent_package_ready:
            log.info("relay: thread %r holds a ready package with its agent's part: left in place", thread_id)
            return None
        final = assemble(**fields, agent=agent, latest_messages=() if agent else work.latest_messages)
        ready = promote(final, self.clock())
        if ready is not None:
            self._ready.add(thread_id)
            self.outbox.add(
                Owed.of_package(ready),
                *(Owed.of_command(item.action_id, thread_id, MasterActionCommandKind.DONE) for item in items),
            )
        elif final != draft and not holding:
            self.outbox.add(Owed.of_package(final))
        await self.flush()
        prepared = Prepared(ready or final, issued, ready.ready_at if ready else None)
        self.prepared.append(prepared)
        log.info(
            "relay: thread %r package %s is %s (agent %s)",
            thread_id,
            prepared.package.handoff_package_id,
            prepared.package.package_status.value,
            "answered" if agent else "not asked or no answer: facts only",
        )
        return prepared

    async def _look(self, thread_id: str) -> ThreadView | None:
        try:
            return await self.look(thread_id)
        except Exception as error:  # the API's view only spares a displaced package: the relay answers without it
            log.warning("relay: could not ask the API about thread %r: %r", thread_id, error)
            return None

    def _written(self, thread_id: str, cycle: ThreadCycle | None, issued: datetime) -> AgentHandoff | None:
        return self.inbox.part(thread_id, cycle, issued) if self.inbox is not None else None

    def resume_text(self, thread_id: str) -> str | None:
        """The resume prompt of the latest ready package this relay made for the thread (what the thread goes on from
        after its compaction); None when it made none."""
        made = [p for p in self.prepared if p.ready_at is not None and p.package.from_thread_id == thread_id]
        return resume_prompt(made[-1].package, self.patch_dir) if made else None

    async def _ask(
        self, thread_id: str, action: MasterAction, cycle: ThreadCycle | None, issued: datetime
    ) -> AgentHandoff | None:
        """The agent's part: asked of the agent when the relay can reach it, else awaited in the inbox (the hooks
        tell the agent to run `handoff write`); None after `ask_seconds`."""
        if self.asker is not None:
            question = self.asker.ask(thread_id, action)
        elif self.inbox is not None:
            question = self._await_part(thread_id, cycle, issued)
        else:
            return None
        try:
            async with asyncio.timeout(self.ask_seconds):
                return await question
        except TimeoutError:
            log.warning("relay: the agent of thread %r gave no handoff in %.0f s", thread_id, self.ask_seconds)
        except Exception:  # an agent tool that fails must not stop the relay: facts alone still make a package
            log.exception("relay: asking the agent of thread %r failed", thread_id)
        return self._written(thread_id, cycle, issued)  # written meanwhile by `handoff write`

    async def _await_part(self, thread_id: str, cycle: ThreadCycle | None, issued: datetime) -> AgentHandoff | None:
        while True:  # another process writes the inbox: nothing here to wait on but the file
            if (agent := self._written(thread_id, cycle, issued)) is not None:
                return agent
            await asyncio.sleep(self.inbox_poll_seconds)

    async def flush(self) -> bool:
        """Deliver what is owed; True when nothing is left."""
        failure = await self.outbox.deliver(self.deliverer)
        if failure is not None:
            log.warning("relay: %d deliveries kept for a retry: %s", len(self.outbox), failure)
        return failure is None

    async def run(
        self,
        poll: Callable[[], Awaitable[Sequence[MasterActionRecord]]] | None = None,
        poll_seconds: float = 5.0,
    ) -> None:
        """Act until cancelled: prepare due threads (one task each), poll the API for actions when given `poll`,
        and retry what is owed with backoff."""
        failures = 0
        working: dict[str, asyncio.Task[Prepared | None]] = {}
        try:
            while True:
                self.woken.clear()
                if poll is not None:
                    try:
                        self.take_records(await poll())
                    except (DeliveryError, RejectedRecord) as error:  # asked again next round
                        log.warning("relay: could not list the open master actions: %s", error)
                for thread_id in self.due:
                    if thread_id not in working or working[thread_id].done():
                        working[thread_id] = asyncio.create_task(self.prepare(thread_id), name=f"relay-{thread_id}")
                delivered = await self.flush()
                failures = 0 if delivered else failures + 1
                wait = poll_seconds if delivered else RETRY.delay(failures, None)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self.woken.wait()
        finally:
            for task in working.values():
                task.cancel()
