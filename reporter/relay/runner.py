"""How `ctxbudget report` runs the relay beside a source: which deliverer, which agent asker, which facts.

- Through the API (5.2): actions come with each answer; packages and commands go to the API.
- Straight to Kafka: packages and commands go to the engine's input topics; actions are listed from the API
  (`--actions-url`), since Kafka gives no answer.
- Codex app-server with the reporter as its client: the client asks the agent (turn/start or turn/steer) and keeps its
  latest messages; the thread is started by the reporter, its first input given (a resume prompt).
- Otherwise (Claude Code, Codex with hooks): the hooks tell the agent to run `ctxbudget handoff write`; the relay
  finds that part in the worker state directory's inbox, shared with that command.
- The API's view of a thread (`look`: its compaction cycle and whether its ready package holds an agent's part) says
  which part is of the current cycle and spares a package holding the agent's part from a facts-only successor.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.handoff import ready_for_cycle
from reporter.budget_api import BudgetApi
from reporter.codex.app_server import CodexAppServerParser
from reporter.codex.app_server_client import AppServerClient
from reporter.delivery.http import HttpDelivery
from reporter.delivery.kafka import KafkaDelivery
from reporter.git_facts import WorkFactTracker
from reporter.hooks.actions import package_to_check
from reporter.readings import Identity
from reporter.relay.assembly import FACTS_ONLY_MARK
from reporter.relay.inbox import cycle_of
from reporter.relay.relay import DEFAULT_ASK_SECONDS, AgentAsker, Look, Relay, ThreadView, ThreadWork, no_look
from reporter.relay.write import RelayPaths
from reporter.reporter import Reporter, run_app_server
from schemas import MasterActionRecord

Poll = Callable[[], Awaitable[Sequence[MasterActionRecord]]]
LOOK_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class RelayOptions:
    enabled: bool = True
    actions_url: str | None = None
    token: str | None = None
    ask_seconds: float = DEFAULT_ASK_SECONDS
    cwd: Path | None = None
    poll_seconds: float = 5.0


def build_relay(
    options: RelayOptions,
    identity: Identity,
    delivery: HttpDelivery | KafkaDelivery,
    paths: RelayPaths,
    asker: AgentAsker | None,
    work_of: Callable[[str], ThreadWork],
    api_url: str | None = None,
) -> tuple[Relay, Poll | None]:
    """The relay and, for a worker reporting to Kafka, how it lists its actions. The API (`api_url`, else
    `--actions-url`) gives the relay its view of a thread."""
    api = api_url or options.actions_url
    relay = Relay(
        identity,
        delivery,
        paths.outbox(),
        paths.patches,
        asker,
        work_of,
        ask_seconds=options.ask_seconds,
        inbox=paths.inbox,
        look=api_look(BudgetApi(api, options.token, LOOK_TIMEOUT_SECONDS)) if api else no_look,
    )
    if isinstance(delivery, HttpDelivery):
        delivery.on_response = relay.take_response
        return relay, None
    if options.actions_url:
        return relay, HttpDelivery(options.actions_url, options.token).open_actions
    return relay, None


def api_look(api: BudgetApi) -> Look:
    """The thread's cycle and whether its ready package of this cycle holds an agent's part, from the 6.3 detail."""

    def view(thread_id: str) -> ThreadView | None:
        detail = api.thread_detail(thread_id)
        if detail is None:
            return None
        cycle = cycle_of(detail)
        held = package_to_check(detail)
        package = api.package(held) if held else None
        agents = (
            package is not None
            and ready_for_cycle(package, cycle.last_compaction_at)
            and not package.summary_text.startswith(FACTS_ONLY_MARK)
        )
        return ThreadView(cycle, agent_package_ready=agents)

    return lambda thread_id: asyncio.to_thread(view, thread_id)


def tracked_work(facts: WorkFactTracker) -> Callable[[str], ThreadWork]:
    """A thread's directory and checklist as the work-fact tracker knows them from its transcript or rollout."""
    return lambda thread_id: ThreadWork(cwd=facts.cwd(thread_id), checklist=facts.checklist(thread_id))


@contextlib.asynccontextmanager
async def relaying(relay: Relay | None, poll: Poll | None, poll_seconds: float) -> AsyncIterator[None]:
    """The relay runs while the source does; what it still owes is tried once more at the end (the rest is kept)."""
    if relay is None:
        yield
        return
    task = asyncio.create_task(relay.run(poll, poll_seconds), name="relay")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await relay.flush()


async def run_as_app_server_client(
    reporter: Reporter,
    client: AppServerClient,
    parser: CodexAppServerParser,
    cwd: Path | None,
    first_input: str | None,
    resume_text: Callable[[str], str | None] | None = None,
) -> str:
    """Start the app-server, start a thread (with `first_input` as its first turn), report until the server ends;
    returns the thread id. After a compaction of a thread, its resume prompt (`resume_text`, from the package made
    for it) is steered into the running turn once, as the SessionStart hook gives it to a Claude Code or Codex CLI
    session: Codex's own summary of the compaction does not carry the package."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    client.on_line = queue.put_nowait
    client.on_compact = parser.expect_manual
    resumed: set[str] = set()
    telling: set[asyncio.Task[bool]] = set()

    def compacted(thread: str) -> None:
        text = resume_text(thread) if resume_text else None
        if text is None or text in resumed:
            return
        resumed.add(text)
        telling.add(task := asyncio.ensure_future(client.tell(thread, text)))
        task.add_done_callback(telling.discard)

    client.on_compacted = compacted
    await client.start()
    thread_id = await client.thread_start(str(cwd) if cwd else None, first_input)

    async def lines() -> AsyncIterator[str]:
        while (line := await queue.get()) is not None:
            yield line

    async def end_of_stream() -> None:
        await client.wait_closed()
        queue.put_nowait(None)

    ender = asyncio.create_task(end_of_stream())
    try:
        await run_app_server(reporter, lines(), parser)
    finally:
        ender.cancel()
    return thread_id


def app_server_work(client: AppServerClient, cwd: Path | None, began_at: datetime) -> Callable[[str], ThreadWork]:
    return lambda thread_id: ThreadWork(cwd=cwd, began_at=began_at, latest_messages=client.latest_messages(thread_id))


def now() -> datetime:
    return datetime.now(UTC)
