"""How `ctxbudget report` runs the relay beside a source: which deliverer, which agent asker, which facts.

- Through the API (5.2): actions come with each answer; packages and commands go to the API.
- Straight to Kafka: packages and commands go to the engine's input topics; actions are listed from the API
  (`--actions-url`), since Kafka gives no answer.
- Codex app-server with the reporter as its client: the client asks the agent (turn/start or turn/steer) and keeps its
  latest messages; the thread is started by the reporter, its first input given (a resume prompt).
- Claude Code: the hooks tell the agent to run `ctxbudget handoff write`; the relay waits for that part in its inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reporter.app_server_client import AppServerClient
from reporter.codex_app_server import CodexAppServerParser
from reporter.git_facts import WorkFactTracker
from reporter.handoff_write import InboxAsker, RelayPaths
from reporter.http_delivery import HttpDelivery
from reporter.kafka_delivery import KafkaDelivery
from reporter.readings import Identity
from reporter.relay import DEFAULT_ASK_SECONDS, AgentAsker, Relay, ThreadWork
from reporter.reporter import Reporter, run_app_server
from schemas import MasterActionRecord

Poll = Callable[[], Awaitable[Sequence[MasterActionRecord]]]


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
    spool_dir: Path,
    asker: AgentAsker | None,
    work_of: Callable[[str], ThreadWork],
) -> tuple[Relay, Poll | None]:
    """The relay and, for a worker reporting to Kafka, how it lists its actions."""
    paths = RelayPaths(spool_dir)
    relay = Relay(identity, delivery, paths.outbox(), paths.patches, asker, work_of, ask_seconds=options.ask_seconds)
    if isinstance(delivery, HttpDelivery):
        delivery.on_response = relay.take_response
        return relay, None
    if options.actions_url:
        return relay, HttpDelivery(options.actions_url, options.token).open_actions
    return relay, None


def tracked_work(facts: WorkFactTracker) -> Callable[[str], ThreadWork]:
    """A thread's directory and checklist as the work-fact tracker knows them from its transcript or rollout."""
    return lambda thread_id: ThreadWork(cwd=facts.cwd(thread_id), checklist=facts.checklist(thread_id))


def claude_code_asker(spool_dir: Path) -> AgentAsker:
    return InboxAsker(RelayPaths(spool_dir))


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
) -> str:
    """Start the app-server, start a thread (with `first_input` as its first turn), report until the server ends;
    returns the thread id."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    client.on_line = queue.put_nowait
    client.on_compact = parser.expect_manual
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
