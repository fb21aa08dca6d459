"""`ctxbudget report`: run the reporter from the command line (the lead mounts `report` as a typer command)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from core.profiles import CODEX_VERSIONS, ClaudeCodeProfile
from core.settings import Settings
from reporter.agent_tool import ReadOptions
from reporter.codex.app_server import CodexAppServerParser
from reporter.codex.app_server_client import AppServerClient, Sandbox
from reporter.codex.tool import APP_SERVER_SOURCE
from reporter.delivery import Delivery
from reporter.delivery.http import HttpDelivery
from reporter.delivery.kafka import KafkaDelivery
from reporter.delivery.spool import Spool, SpoolBusy, claim_spool, lock_directory
from reporter.delivery.spooled import SpooledDelivery
from reporter.git_facts import (
    DEFAULT_DECISION_PATHS,
    DEFAULT_HARDWARE_PATTERNS,
    DEFAULT_TEST_PATTERNS,
    FactPatterns,
    WorkFactTracker,
)
from reporter.readings import Identity
from reporter.relay.relay import Relay, ThreadWork
from reporter.relay.runner import (
    RelayOptions,
    app_server_work,
    build_relay,
    now,
    relaying,
    run_as_app_server_client,
    tracked_work,
)
from reporter.relay.write import RelayPaths
from reporter.reporter import AnyTailer, Reporter, run_app_server, run_events, run_rollouts
from reporter.tools import FILE_SOURCES, TOOLS
from reporter.worker_state import SPOOL, state_dir

EVENTS = "events"
"""`--from events`: our own session events, one JSON object per line (the hooks' file)."""
Source = StrEnum(
    "Source", {s.upper().replace("-", "_"): s for t in TOOLS for s in (*t.streams, t.files.name)} | {"EVENTS": EVENTS}
)
"""`--from`: each tool's files and streams (reporter/tools.py), and session events."""
APP_SERVER_STATE = "app_server_threads.json"
PENDING_EVENTS = "pending_events.jsonl"


async def file_lines(path: Path | None) -> AsyncIterator[str]:
    """Lines of a file, or of stdin when no path is given, read in a thread so the event loop keeps its timers."""
    stream = sys.stdin if path is None else path.open(encoding="utf-8", errors="replace")
    try:
        while line := await asyncio.to_thread(stream.readline):
            yield line
    finally:
        if path is not None:
            stream.close()


async def process_lines(command: str) -> AsyncIterator[str]:
    """Lines of the stdout of a process the reporter starts (its stderr passes through)."""
    process = await asyncio.create_subprocess_exec(*shlex.split(command), stdout=asyncio.subprocess.PIPE)
    stdout = process.stdout
    if stdout is None:
        raise RuntimeError("the child process has no stdout pipe")
    try:
        while line := await stdout.readline():
            yield line.decode("utf-8", errors="replace")
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


def _delivery(
    settings: Settings, api_url: str | None, token: str | None, worker_id: str
) -> HttpDelivery | KafkaDelivery:
    if api_url:
        return HttpDelivery(api_url, token)
    if not settings.kafka_bootstrap_servers:
        raise typer.BadParameter("give --api-url, or set CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS to send to Kafka")
    return KafkaDelivery(settings.kafka_bootstrap_servers, settings.topic_prefix, worker_id)


def fact_patterns(
    tests: list[str] | None, decisions: list[str] | None, hardware: list[str] | None, waiting: list[str] | None
) -> FactPatterns:
    """The spec 4.2 patterns given on the command line, each list replacing its default; a bad regex is refused."""
    for pattern in (*(tests or ()), *(hardware or ()), *(waiting or ())):
        try:
            re.compile(pattern)
        except re.error as error:
            raise typer.BadParameter(f"{pattern!r} is no regular expression: {error}") from error
    defaults = FactPatterns()
    return FactPatterns(
        test=tuple(tests) if tests else defaults.test,
        decision_paths=tuple(decisions) if decisions else defaults.decision_paths,
        hardware=tuple(hardware) if hardware else defaults.hardware,
        waiting=tuple(waiting) if waiting else defaults.waiting,
    )


def report(
    sources: Annotated[
        list[Source],
        typer.Option(
            "--from",
            help="What to read; claude-code and codex-rollouts may be given together (one process tails both).",
        ),
    ],
    node_id: Annotated[str, typer.Option(envvar="CTXBUDGET_NODE_ID", help="This machine (spec 5.2 node_id).")],
    worker_id: Annotated[str, typer.Option(envvar="CTXBUDGET_WORKER_ID", help="This worker (spec 5.2).")],
    project_id: Annotated[str, typer.Option(envvar="CTXBUDGET_PROJECT_ID", help="The threads' project.")],
    task_id: Annotated[str | None, typer.Option(envvar="CTXBUDGET_TASK_ID", help="The threads' task.")] = None,
    input_path: Annotated[
        Path | None, typer.Option("--input", help="app-server / events: a JSONL file (default: stdin).")
    ] = None,
    exec_command: Annotated[
        str | None, typer.Option("--exec", help="app-server / events: read the stdout of this command instead.")
    ] = None,
    rollout_dirs: Annotated[
        list[Path] | None,
        typer.Option(
            "--dir",
            help=f"{' / '.join(FILE_SOURCES)}: the directory of the tool's files, once per --from, in their order "
            f"(default: {', '.join(f'{name} {files.default_dir}' for name, files in FILE_SOURCES.items())}).",
        ),
    ] = None,
    state_file: Annotated[
        Path | None,
        typer.Option(
            help="codex-rollouts or claude-code alone: read positions (default: <worker state dir>/<source>.json)."
        ),
    ] = None,
    poll_seconds: Annotated[
        float, typer.Option(min=0.05, help="codex-rollouts / claude-code: how often to look for lines.")
    ] = 1.0,
    api_url: Annotated[
        str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="Report through the API (else Kafka).")
    ] = None,
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
    claude_max_output: Annotated[
        int, typer.Option(min=1, help="claude-code: the model's max output tokens (sets the compaction point).")
    ] = ClaudeCodeProfile.max_output_tokens,
    claude_window: Annotated[int, typer.Option(min=1, help="claude-code: the context window.")] = (
        ClaudeCodeProfile.default_window_tokens
    ),
    codex_profile: Annotated[
        str, typer.Option(help=f"How Codex computes its percent: {', '.join(CODEX_VERSIONS)}.")
    ] = "with-reasoning",
    spool_dir: Annotated[
        Path | None,
        typer.Option(
            help="Snapshots and relay deliveries not made yet (default: <worker state dir>/spool; a second reporter "
            "running at once takes spool-2, ...). One reporter at a time per directory."
        ),
    ] = None,
    test_command: Annotated[
        list[str] | None,
        typer.Option(
            help="Spec 4.2: a regex of commands that run tests (repeatable; replaces the defaults: "
            + ", ".join(DEFAULT_TEST_PATTERNS)
            + ")."
        ),
    ] = None,
    decision_path: Annotated[
        list[str] | None,
        typer.Option(
            help="Spec 4.2: a glob of files that record decisions (repeatable; replaces the defaults: "
            + ", ".join(DEFAULT_DECISION_PATHS)
            + ")."
        ),
    ] = None,
    hardware_command: Annotated[
        list[str] | None,
        typer.Option(
            help="Spec 4.2: a regex of uninterruptible hardware steps (repeatable; replaces the default: "
            + ", ".join(DEFAULT_HARDWARE_PATTERNS)
            + ")."
        ),
    ] = None,
    waiting_command: Annotated[
        list[str] | None,
        typer.Option(help="Spec 4.2: a regex of commands that wait on another node (repeatable; none by default)."),
    ] = None,
    app_server: Annotated[
        str | None,
        typer.Option(help="codex-app-server: be the client of this command (e.g. 'codex app-server'), start a thread."),
    ] = None,
    first_input: Annotated[
        Path | None,
        typer.Option(help="--app-server: a file whose text is the new thread's first input (a resume prompt)."),
    ] = None,
    cwd: Annotated[Path | None, typer.Option(help="--app-server: the thread's working directory (git facts).")] = None,
    sandbox: Annotated[
        Sandbox,
        typer.Option(help="--app-server: the thread's sandbox (Codex's own default, read-only, fails every write)."),
    ] = Sandbox.WORKSPACE_WRITE,
    relay: Annotated[
        bool, typer.Option(help="Act on master actions: acknowledge, write handoff packages, complete (issue 23).")
    ] = True,
    actions_url: Annotated[
        str | None,
        typer.Option(envvar="CTXBUDGET_ACTIONS_URL", help="Reporting to Kafka: the API to list master actions from."),
    ] = None,
    ask_seconds: Annotated[
        float, typer.Option(min=0.0, help="How long the relay waits for the agent's part before facts alone.")
    ] = 120.0,
) -> None:
    """Report real agent threads' context budgets: Codex app-server notifications, Codex rollout files, or our own
    session events (one JSON object per line)."""
    if codex_profile not in CODEX_VERSIONS:
        raise typer.BadParameter(f"--codex-profile must be one of {', '.join(CODEX_VERSIONS)}")
    if sum(option is not None for option in (input_path, exec_command, app_server)) > 1:
        raise typer.BadParameter("give one of --input, --exec and --app-server")
    if app_server is not None and sources != [APP_SERVER_SOURCE]:
        raise typer.BadParameter("--app-server is for --from codex-app-server")
    if EVENTS in sources and api_url:
        raise typer.BadParameter("session events go to Kafka: spec 5.2 has no endpoint for them")
    patterns = fact_patterns(test_command, decision_path, hardware_command, waiting_command)
    settings = Settings()
    shared = state_dir(settings)
    spool, lock = _claim(spool_dir, shared)
    identity = Identity(node_id=node_id, worker_id=worker_id, project_id=project_id, task_id=task_id)
    lines = process_lines(exec_command) if exec_command else file_lines(input_path)
    source = _one_kind(sources)
    facts = WorkFactTracker(patterns)
    tailers: list[AnyTailer] = []
    if source is None:
        claude_profile = ClaudeCodeProfile(default_window_tokens=claude_window, max_output_tokens=claude_max_output)
        tailers = _tailers(sources, rollout_dirs or [], state_file, shared, ReadOptions(facts, claude_profile))
    with lock:
        undelivered = asyncio.run(
            _stoppable(
                _run(
                    source,
                    _delivery(settings, api_url, token, worker_id),
                    identity,
                    lines,
                    tailers,
                    poll_seconds,
                    codex_profile,
                    RelayPaths(spool, shared),
                    RelayOptions(enabled=relay, actions_url=actions_url, token=token, ask_seconds=ask_seconds, cwd=cwd),
                    _Asking(
                        AppServerClient(shlex.split(app_server), sandbox=sandbox) if app_server else None,
                        first_input.read_text(encoding="utf-8") if first_input else None,
                        facts=facts,
                        api_url=api_url,
                    ),
                )
            )
        )
    if undelivered:
        raise typer.Exit(1)


def _claim(spool_dir: Path | None, shared: Path) -> tuple[Path, IO[bytes]]:
    """The spool directory, locked for this process: the one given (refused while another process holds it), else
    the first free of the state directory's spools."""
    try:
        if spool_dir is not None:
            return spool_dir, lock_directory(spool_dir)
        return claim_spool(shared / SPOOL)
    except SpoolBusy as error:
        raise typer.BadParameter(f"{error}: give this reporter a --spool-dir of its own") from error


async def _stoppable(run: Coroutine[Any, Any, int]) -> int:
    """`run`, cancelled by SIGTERM as by Ctrl-C, so that its finally blocks deliver what they can and its summary is
    printed (a second signal stops at once)."""
    task = asyncio.ensure_future(run)
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        for each in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(each)
        typer.echo(f"ctxbudget report: {signal.Signals(signum).name}: stopping", err=True)
        task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop, signum)
    return await task


@dataclass(frozen=True)
class _Asking:
    """How the relay asks the agent for its part: as the app-server's client, or by the hooks' inbox."""

    client: AppServerClient | None
    first_input: str | None
    facts: WorkFactTracker
    api_url: str | None


def _one_kind(sources: list[Source]) -> Source | None:
    """The stream source (app-server, events), which comes alone; None for file sources, which may come together."""
    if len(set(sources)) != len(sources):
        raise typer.BadParameter("give each --from once")
    streams = [s for s in sources if s not in FILE_SOURCES]
    if streams and len(sources) > 1:
        raise typer.BadParameter(f"--from {streams[0]} reads one stream: give it alone")
    return streams[0] if streams else None


def _tailers(
    sources: list[Source],
    directories: list[Path],
    state_file: Path | None,
    shared: Path,
    options: ReadOptions,
) -> list[AnyTailer]:
    if directories and len(directories) != len(sources):
        raise typer.BadParameter("give --dir once per --from, in the same order, or not at all")
    if state_file is not None and len(sources) > 1:
        raise typer.BadParameter("--state-file names one source's positions: with several, each has its default")
    tailers: list[AnyTailer] = []
    for index, source in enumerate(sources):
        files = FILE_SOURCES[source]
        directory = directories[index] if directories else files.default_dir
        tailers.append(files.tailer(directory, state_file or shared / files.state_name, options))
    return tailers


async def _run(
    source: Source | None,
    delivery: Delivery,
    identity: Identity,
    lines: AsyncIterator[str],
    tailers: list[AnyTailer],
    poll_seconds: float,
    codex_profile: str,
    paths: RelayPaths,
    relay_options: RelayOptions,
    asking: _Asking,
) -> int:
    """Report until the input ends (or the run is cancelled); returns how many snapshots were not delivered
    (rejected, or left spooled)."""
    spool_dir = paths.spool_dir
    if isinstance(delivery, KafkaDelivery):
        await delivery.start()
    inner = delivery
    if source != EVENTS:
        delivery = SpooledDelivery(Spool(spool_dir), delivery)
        await delivery.start()
    # compaction events not delivered survive a restart beside the spool
    reporter = Reporter(identity, delivery, CODEX_VERSIONS[codex_profile], pending_events=spool_dir / PENDING_EVENTS)
    relay, poll = None, None
    if relay_options.enabled and isinstance(inner, HttpDelivery | KafkaDelivery):
        client = asking.client
        # the agent's part: asked as the app-server's client, else written by `handoff write` into the shared inbox
        if client is not None:
            asker, work = client, app_server_work(client, relay_options.cwd, now())
        elif source is None:  # transcripts and rollouts: the directory and commands they name
            asker, work = None, tracked_work(asking.facts)
        else:  # an app-server that is not ours, or session events
            asker, work = None, lambda _: ThreadWork(cwd=relay_options.cwd)
        relay, poll = build_relay(relay_options, identity, inner, paths, asker, work, asking.api_url)
    with contextlib.suppress(asyncio.CancelledError):  # stopped by a signal: the summary still follows
        try:
            async with relaying(relay, poll, relay_options.poll_seconds):
                if source == APP_SERVER_SOURCE:
                    parser = CodexAppServerParser(spool_dir / APP_SERVER_STATE)  # compaction counts survive restarts
                    try:
                        if asking.client is not None:
                            thread = await run_as_app_server_client(
                                reporter,
                                asking.client,
                                parser,
                                relay_options.cwd,
                                asking.first_input,
                                relay.resume_text if relay else None,
                            )
                            typer.echo(f"app-server thread {thread} ended", err=True)
                        else:
                            await run_app_server(reporter, lines, parser)
                    finally:
                        ignored, skipped = dict(parser.ignored), dict(parser.skipped.counts)
                        typer.echo(f"ignored notifications: {ignored}; skipped lines: {skipped}", err=True)
                elif source is None:
                    await run_rollouts(reporter, tailers, poll_seconds)
                else:
                    skipped_events = await run_events(delivery, lines)
                    typer.echo(f"skipped lines: {dict(skipped_events.counts)}", err=True)
        finally:
            if asking.client is not None:
                await asking.client.close()
            await delivery.close()
    return _summary(reporter, delivery, relay)


def _summary(reporter: Reporter, delivery: Delivery, relay: Relay | None) -> int:
    """Say what was delivered and what was kept; the count of snapshots and events not delivered (what the relay
    still owes is kept on disk and said, not counted: an action the API has not stored yet is no failure)."""
    if relay is not None:
        owed = len(relay.outbox)
        ready = sum(p.ready_at is not None for p in relay.prepared)
        typer.echo(
            f"relay: {len(relay.prepared)} packages made ({ready} ready), {relay.outbox.delivered} deliveries,"
            f" {relay.outbox.rejected} refused, {owed} kept for the next run",
            err=True,
        )
    if not isinstance(delivery, SpooledDelivery):
        typer.echo(f"sent {reporter.sent} snapshots", err=True)
        return 0
    spooled = delivery
    rejected = f"rejected {spooled.rejected}" + (f" (set aside in {spooled.rejected_path})" if spooled.rejected else "")
    left = f"left {len(spooled.spool)}" + (" (kept for the next run)" if len(spooled.spool) else "")
    events = f"; compaction events left {reporter.events_left}" if reporter.events_left else ""
    delivered = f"delivered {spooled.delivered}"
    typer.echo(f"spooled {reporter.sent} snapshots, {delivered}, {rejected}, {left}{events}", err=True)
    return spooled.rejected + len(spooled.spool) + reporter.events_left
