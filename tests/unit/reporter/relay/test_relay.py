"""The relay on the worker: actions from 5.2 answers acked, a wrap-up answered draft -> ready -> done, nothing lost."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reporter.delivery import DeliveryError, RejectedRecord
from reporter.readings import Identity
from reporter.relay.agent_handoff import AgentHandoff
from reporter.relay.assembly import FACTS_ONLY_MARK
from reporter.relay.inbox import ThreadCycle
from reporter.relay.outbox import OUTBOX_NAME, RelayOutbox
from reporter.relay.relay import Relay, ThreadView, ThreadWork, package_id
from reporter.relay.write import RelayPaths, leave_part, write_handoff
from schemas import (
    ContextBudgetLevel,
    HandoffPackage,
    MasterAction,
    MasterActionCommandKind,
    MasterActionItem,
    MasterActionRecord,
    MasterActionState,
    PackageStatus,
    WorkerReportResponse,
)

NOW = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
IDENTITY = Identity(node_id="n", worker_id="w", project_id="proj-1", task_id="task-1")
AGENT = AgentHandoff(summary="Where it stands.", next_actions=["next"])


def item(action: MasterAction, action_id: str, state: MasterActionState = MasterActionState.ISSUED):
    return MasterActionItem(
        action_id=action_id,
        action=action,
        state=state,
        context_budget_level=ContextBudgetLevel.WATCH,
        issued_at=NOW,
        state_changed_at=NOW,
    )


def answer(thread_id: str, *items: MasterActionItem) -> WorkerReportResponse:
    return WorkerReportResponse(
        accepted=True,
        thread_id=thread_id,
        context_budget_level=ContextBudgetLevel.WATCH,
        next_required_report_in_seconds=15,
        master_actions=[i.action for i in items],
        open_master_actions=list(items),
    )


class Receiver:
    """Records what it took; fails while `down`; commands answer 404 (not in the API's store yet) while `unplaced`."""

    def __init__(self) -> None:
        self.packages: list[HandoffPackage] = []
        self.commands: list[tuple[str, MasterActionCommandKind]] = []
        self.down = False
        self.unplaced = False
        self.refuse_packages = False

    async def send_package(self, package: HandoffPackage) -> None:
        if self.down:
            raise DeliveryError("down")
        if self.refuse_packages:
            raise RejectedRecord("409 the engine would drop this package")
        self.packages.append(package)

    async def send_action_command(self, action_id: str, thread_id: str, command: MasterActionCommandKind) -> None:
        if self.down or self.unplaced:
            raise DeliveryError("404 master action not found")
        self.commands.append((action_id, command))


class Asker:
    def __init__(self, answer: AgentHandoff | None = AGENT, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.asked: list[tuple[str, MasterAction]] = []

    async def ask(self, thread_id: str, action: MasterAction) -> AgentHandoff | None:
        self.asked.append((thread_id, action))
        await asyncio.sleep(self.delay)
        return self.answer


def relay(tmp_path: Path, receiver: Receiver, asker=None, **kwargs) -> Relay:
    outbox = RelayOutbox(tmp_path / OUTBOX_NAME, tmp_path / "rejected.jsonl")
    clock = iter(NOW + timedelta(seconds=i) for i in range(1000))
    return Relay(IDENTITY, receiver, outbox, tmp_path / "patches", asker, clock=lambda: next(clock), **kwargs)


async def test_a_wrap_up_in_a_5_2_answer_is_acked_then_answered_draft_ready_and_done(tmp_path) -> None:
    receiver, asker = Receiver(), Asker()
    subject = relay(tmp_path, receiver, asker)
    handoff = item(MasterAction.PREPARE_HANDOFF, "a-1")
    other = item(MasterAction.AVOID_LARGE_CONTEXT_APPEND, "a-2")
    subject.take_response(answer("thr-1", handoff, other))
    subject.take_response(answer("thr-1", handoff, other))  # the next answer repeats them: taken once
    assert subject.due == ["thr-1"]

    prepared = await subject.prepare("thr-1")

    assert asker.asked == [("thr-1", MasterAction.PREPARE_HANDOFF)]
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT, PackageStatus.READY]
    draft, ready = receiver.packages
    assert draft.handoff_package_id == ready.handoff_package_id == package_id("thr-1", "a-1")
    assert (ready.from_thread_id, ready.project_id, ready.task_id) == ("thr-1", "proj-1", "task-1")
    assert ready.created_at == draft.created_at
    assert ready.summary_text.startswith("Where it stands.")
    assert receiver.commands == [
        ("a-1", MasterActionCommandKind.ACK),
        ("a-2", MasterActionCommandKind.ACK),
        ("a-1", MasterActionCommandKind.DONE),
    ]
    assert prepared is not None
    assert prepared.ready_at == ready.ready_at
    assert prepared.issued_at == NOW
    assert len(subject.outbox) == 0
    assert subject.due == []


async def test_an_agent_that_does_not_answer_in_time_gets_a_package_from_facts_alone(tmp_path) -> None:
    receiver = Receiver()
    work = ThreadWork(latest_messages=("I renamed the parser.",))
    subject = relay(tmp_path, receiver, Asker(delay=5), work_of=lambda _: work, ask_seconds=0.05)
    subject.take("thr-1", [item(MasterAction.PRE_COMPACTION_WRAP_UP, "a-9")])
    await subject.prepare("thr-1")
    ready = receiver.packages[-1]
    assert ready.package_status is PackageStatus.READY
    assert ready.summary_text.startswith(FACTS_ONLY_MARK)
    assert "I renamed the parser." in ready.summary_text


async def test_with_nothing_known_and_no_agent_the_package_stays_a_draft_and_the_action_open(tmp_path) -> None:
    receiver = Receiver()
    subject = relay(tmp_path, receiver)
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT]
    assert receiver.commands == [("a-1", MasterActionCommandKind.ACK)]


async def test_done_and_superseded_actions_are_not_taken(tmp_path) -> None:
    subject = relay(tmp_path, Receiver())
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1", MasterActionState.DONE)])
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-2", MasterActionState.SUPERSEDED)])
    assert subject.due == []
    assert len(subject.outbox) == 0


async def test_what_cannot_be_delivered_survives_a_restart_and_goes_out_in_order(tmp_path) -> None:
    receiver, asker = Receiver(), Asker()
    receiver.down = True
    subject = relay(tmp_path, receiver, asker)
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    assert receiver.packages == []
    assert [o.kind for o in subject.outbox.owed()] == ["command", "package", "package", "command"]

    receiver.down = False
    restarted = relay(tmp_path, receiver)  # a new process reads the outbox file
    assert len(restarted.outbox) == 4
    assert await restarted.flush()
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT, PackageStatus.READY]
    assert [c for _, c in receiver.commands] == [MasterActionCommandKind.ACK, MasterActionCommandKind.DONE]
    assert RelayOutbox(tmp_path / OUTBOX_NAME, tmp_path / "r").owed() == []


async def test_an_action_the_api_cannot_place_yet_holds_back_no_package(tmp_path) -> None:
    receiver = Receiver()
    receiver.unplaced = True
    subject = relay(tmp_path, receiver, Asker())
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT, PackageStatus.READY]
    assert [o.command for o in subject.outbox.owed()] == [MasterActionCommandKind.ACK, MasterActionCommandKind.DONE]
    receiver.unplaced = False
    assert await subject.flush()
    assert [c for _, c in receiver.commands] == [MasterActionCommandKind.ACK, MasterActionCommandKind.DONE]


async def test_a_refused_package_is_set_aside_with_its_reason(tmp_path) -> None:
    receiver = Receiver()
    receiver.refuse_packages = True
    subject = relay(tmp_path, receiver, Asker())
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    lines = (tmp_path / "rejected.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert "409 the engine would drop" in lines[0]
    assert subject.outbox.rejected == 2


async def test_run_polls_the_api_for_a_kafka_worker_and_prepares_each_due_thread(tmp_path) -> None:
    receiver = Receiver()
    subject = relay(tmp_path, receiver, Asker())
    record = MasterActionRecord(
        action_id="a-7",
        thread_id="thr-7",
        project_id="proj-7",
        context_budget_level=ContextBudgetLevel.CRITICAL,
        actions=[MasterAction.PRE_COMPACTION_WRAP_UP],
        issued_at=NOW,
    )
    polled = 0

    async def poll() -> list[MasterActionRecord]:
        nonlocal polled
        polled += 1
        return [record]

    task = asyncio.create_task(subject.run(poll, poll_seconds=0.01))
    try:
        for _ in range(500):
            if receiver.commands[-1:] == [("a-7", MasterActionCommandKind.DONE)]:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert polled > 1
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT, PackageStatus.READY]
    assert {p.project_id for p in receiver.packages} == {"proj-7"}  # the listed action's, not the identity's
    assert receiver.commands == [("a-7", MasterActionCommandKind.ACK), ("a-7", MasterActionCommandKind.DONE)]


@pytest.mark.parametrize("state", [MasterActionState.ISSUED, MasterActionState.ACKNOWLEDGED])
async def test_open_states_are_taken(tmp_path, state) -> None:
    subject = relay(tmp_path, Receiver())
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1", state)])
    assert subject.due == ["thr-1"]


async def test_a_later_wrap_up_never_displaces_a_ready_package_with_a_draft(tmp_path) -> None:
    receiver = Receiver()
    subject = relay(tmp_path, receiver, Asker())
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    subject.take("thr-1", [item(MasterAction.PRE_COMPACTION_WRAP_UP, "a-2")])
    await subject.prepare("thr-1")
    statuses = [(p.handoff_package_id, p.package_status) for p in receiver.packages]
    first, second = package_id("thr-1", "a-1"), package_id("thr-1", "a-2")
    assert statuses == [
        (first, PackageStatus.DRAFT),
        (first, PackageStatus.READY),
        (second, PackageStatus.READY),  # the refreshed package replaces the ready one only once it is ready itself
    ]


CYCLE = ThreadCycle(compaction_count=2, last_compaction_at=NOW - timedelta(hours=1))
CURRENT = ThreadView(CYCLE)


def inbox_relay(tmp_path: Path, receiver, view: ThreadView | None = CURRENT, **kwargs) -> Relay:
    async def look(_: str) -> ThreadView | None:
        return view

    paths = RelayPaths(tmp_path / "spool", tmp_path / "state")
    return relay(tmp_path, receiver, inbox=paths.inbox, look=look, inbox_poll_seconds=0.01, **kwargs)


async def test_the_agents_part_written_before_a_wrap_up_stays_in_the_package_the_engine_sees_last(tmp_path) -> None:
    """The sequence seen with the real tools: the agent runs `handoff write`, then the relay takes a wrap-up."""
    receiver = Receiver()
    paths = RelayPaths(tmp_path / "handoff-write", tmp_path / "state")
    leave_part(paths, "thr-1", AGENT, CYCLE, NOW - timedelta(seconds=10))
    written, _ = await write_handoff(
        AGENT, IDENTITY, "thr-1", tmp_path, None, paths, receiver, NOW - timedelta(seconds=10)
    )
    assert written.package_status is PackageStatus.READY
    subject = inbox_relay(tmp_path, receiver, ask_seconds=5)
    subject.take("thr-1", [item(MasterAction.PRE_COMPACTION_WRAP_UP, "a-2")])
    await subject.prepare("thr-1")
    after = receiver.packages[2:]  # what the relay posted after the agent's draft and ready
    assert [p.package_status for p in after] == [PackageStatus.READY]  # no facts-only draft in between
    assert receiver.packages[-1].summary_text.startswith("Where it stands.")
    assert not any(p.summary_text.startswith(FACTS_ONLY_MARK) for p in receiver.packages)
    assert receiver.commands[-1] == ("a-2", MasterActionCommandKind.DONE)


async def test_a_part_written_while_the_relay_waits_makes_the_ready_package(tmp_path) -> None:
    receiver = Receiver()
    subject = inbox_relay(tmp_path, receiver, ask_seconds=5)
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    preparing = asyncio.create_task(subject.prepare("thr-1"))
    await asyncio.sleep(0.05)
    assert not preparing.done()
    leave_part(RelayPaths(tmp_path / "x", tmp_path / "state"), "thr-1", AGENT, CYCLE, NOW)
    prepared = await asyncio.wait_for(preparing, 5)
    assert prepared is not None
    assert [p.package_status for p in receiver.packages] == [PackageStatus.DRAFT, PackageStatus.READY]
    assert receiver.packages[-1].summary_text.startswith("Where it stands.")


async def test_a_part_of_an_earlier_cycle_does_not_count(tmp_path) -> None:
    receiver = Receiver()
    earlier = ThreadCycle(compaction_count=1)
    leave_part(RelayPaths(tmp_path / "x", tmp_path / "state"), "thr-1", AGENT, earlier, NOW - timedelta(hours=2))
    work = ThreadWork(latest_messages=("I renamed the parser.",))
    subject = inbox_relay(tmp_path, receiver, ask_seconds=0.05, work_of=lambda _: work)
    subject.take("thr-1", [item(MasterAction.PREPARE_HANDOFF, "a-1")])
    await subject.prepare("thr-1")
    assert receiver.packages[-1].summary_text.startswith(FACTS_ONLY_MARK)


async def test_a_ready_package_holding_an_agents_part_is_never_displaced_by_facts(tmp_path) -> None:
    """The agent wrote where this relay's inbox cannot see it; the API shows its ready package: left in place."""
    receiver = Receiver()
    work = ThreadWork(latest_messages=("I renamed the parser.",))
    view = ThreadView(CYCLE, agent_package_ready=True)
    subject = inbox_relay(tmp_path, receiver, view, ask_seconds=0.05, work_of=lambda _: work)
    subject.take("thr-1", [item(MasterAction.PRE_COMPACTION_WRAP_UP, "a-1")])
    assert await subject.prepare("thr-1") is None
    assert receiver.packages == []


async def test_a_wrap_up_of_a_cycle_that_ended_makes_no_package(tmp_path) -> None:
    """Seen with the real tools: an open wrap-up issued at critical reaches the relay with the first report after the
    compaction. Its cycle is over; the agent's part was of that cycle, so a package now would be facts only, made
    after waiting for a part that will not come."""
    receiver = Receiver()
    compacted = ThreadView(ThreadCycle(compaction_count=3, last_compaction_at=NOW + timedelta(seconds=5)))
    subject = inbox_relay(tmp_path, receiver, compacted, ask_seconds=5)
    subject.take("thr-1", [item(MasterAction.PRE_COMPACTION_WRAP_UP, "a-1")])
    assert await asyncio.wait_for(subject.prepare("thr-1"), 1) is None
    assert receiver.packages == []
