"""`ctxbudget report`: run the reporter from the command line (the lead mounts `report` as a typer command)."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import AsyncIterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core.settings import Settings
from reporter.app_server_client import AppServerClient
from reporter.budget import CODEX_PROFILES
from reporter.claude_code import ClaudeCodeProfile, TranscriptTailer
from reporter.codex_app_server import CodexAppServerParser
from reporter.codex_rollouts import RolloutTailer
from reporter.git_facts import WorkFactTracker
from reporter.http_sink import HttpSink
from reporter.kafka_sink import KafkaSink
from reporter.readings import Identity
from reporter.relay import Relay, ThreadWork
from reporter.relay_runner import (
    RelayOptions,
    app_server_work,
    build_relay,
    claude_code_asker,
    claude_code_work,
    now,
    relaying,
    run_as_app_server_client,
)
from reporter.reporter import Reporter, run_app_server, run_events, run_rollouts
from reporter.sink import Sink
from reporter.spool import Spool
from reporter.spooled_sink import SpooledSink


class Source(StrEnum):
    CODEX_APP_SERVER = "codex-app-server"
    CODEX_ROLLOUTS = "codex-rollouts"
    EVENTS = "events"
    CLAUDE_CODE = "claude-code"


DEFAULT_ROLLOUT_DIR = Path.home() / ".codex" / "sessions"
DEFAULT_CLAUDE_DIR = Path.home() / ".claude" / "projects"
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


def _sink(settings: Settings, api_url: str | None, token: str | None, worker_id: str) -> HttpSink | KafkaSink:
    if api_url:
        return HttpSink(api_url, token)
    if not settings.kafka_bootstrap_servers:
        raise typer.BadParameter("give --api-url, or set CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS to send to Kafka")
    return KafkaSink(settings.kafka_bootstrap_servers, settings.topic_prefix, worker_id)


def report(
    source: Annotated[Source, typer.Option("--from", help="What to read.")],
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
    rollout_dir: Annotated[
        Path | None,
        typer.Option("--dir", help="codex-rollouts / claude-code: the sessions (projects) directory."),
    ] = None,
    state_file: Annotated[
        Path | None,
        typer.Option(help="codex-rollouts / claude-code: read positions (default: <data dir>/reporter/<source>.json)."),
    ] = None,
    poll_seconds: Annotated[float, typer.Option(min=0.05, help="codex-rollouts: how often to look for lines.")] = 1.0,
    api_url: Annotated[
        str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="Report through the API (else Kafka).")
    ] = None,
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
    claude_max_output: Annotated[
        int, typer.Option(min=1, help="claude-code: the model's max output tokens (sets the compaction point).")
    ] = ClaudeCodeProfile.max_output_tokens,
    claude_window: Annotated[int, typer.Option(min=1, help="claude-code: the context window.")] = (
        ClaudeCodeProfile.window_tokens
    ),
    codex_profile: Annotated[
        str, typer.Option(help=f"How Codex computes its percent: {', '.join(CODEX_PROFILES)}.")
    ] = "reference",
    spool_dir: Annotated[
        Path | None, typer.Option(help="Snapshots not delivered yet (default: <data dir>/reporter/spool).")
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
    if codex_profile not in CODEX_PROFILES:
        raise typer.BadParameter(f"--codex-profile must be one of {', '.join(CODEX_PROFILES)}")
    if sum(option is not None for option in (input_path, exec_command, app_server)) > 1:
        raise typer.BadParameter("give one of --input, --exec and --app-server")
    if app_server is not None and source is not Source.CODEX_APP_SERVER:
        raise typer.BadParameter("--app-server is for --from codex-app-server")
    if source is Source.EVENTS and api_url:
        raise typer.BadParameter("session events go to Kafka: spec 5.2 has no endpoint for them")
    settings = Settings()
    identity = Identity(node_id=node_id, worker_id=worker_id, project_id=project_id, task_id=task_id)
    lines = process_lines(exec_command) if exec_command else file_lines(input_path)
    claude = source is Source.CLAUDE_CODE
    directory = rollout_dir or (DEFAULT_CLAUDE_DIR if claude else DEFAULT_ROLLOUT_DIR)
    state_name = "claude-code.json" if claude else "rollouts.json"
    undelivered = asyncio.run(
        _run(
            source,
            settings,
            _sink(settings, api_url, token, worker_id),
            identity,
            lines,
            directory,
            state_file or settings.resolved_data_dir / "reporter" / state_name,
            poll_seconds,
            codex_profile,
            spool_dir or settings.resolved_data_dir / "reporter" / "spool",
            ClaudeCodeProfile(window_tokens=claude_window, max_output_tokens=claude_max_output),
            RelayOptions(enabled=relay, actions_url=actions_url, token=token, ask_seconds=ask_seconds, cwd=cwd),
            AppServerClient(shlex.split(app_server)) if app_server else None,
            first_input.read_text(encoding="utf-8") if first_input else None,
        )
    )
    if undelivered:
        raise typer.Exit(1)


async def _run(
    source: Source,
    settings: Settings,
    sink: Sink,
    identity: Identity,
    lines: AsyncIterator[str],
    rollout_dir: Path,
    state_file: Path,
    poll_seconds: float,
    codex_profile: str,
    spool_dir: Path,
    claude_profile: ClaudeCodeProfile,
    relay_options: RelayOptions,
    client: AppServerClient | None,
    first_input: str | None,
) -> int:
    """Report until the input ends; returns how many snapshots were not delivered (rejected, or left spooled)."""
    with_events = isinstance(sink, KafkaSink)  # spec 5.2 has no endpoint for session events
    if with_events:
        await sink.start()
    inner = sink
    facts = WorkFactTracker()
    if source is not Source.EVENTS:
        sink = SpooledSink(Spool(spool_dir), sink)
        await sink.start()
    # compaction events not delivered survive a restart beside the spool
    reporter = Reporter(identity, sink, CODEX_PROFILES[codex_profile], pending_events=spool_dir / PENDING_EVENTS)
    relay, poll = None, None
    if relay_options.enabled and isinstance(inner, HttpSink | KafkaSink):
        if client is not None:
            asker, work = client, app_server_work(client, relay_options.cwd, now())
        elif source is Source.CLAUDE_CODE:
            asker, work = claude_code_asker(spool_dir), claude_code_work(facts)
        else:  # an app-server or rollouts that are not ours: the agent cannot be asked, facts alone
            asker, work = None, lambda _: ThreadWork(cwd=relay_options.cwd)
        relay, poll = build_relay(relay_options, identity, inner, spool_dir, asker, work)
    try:
        async with relaying(relay, poll, relay_options.poll_seconds):
            if source is Source.CODEX_APP_SERVER:
                parser = CodexAppServerParser(spool_dir / APP_SERVER_STATE)  # compaction counts survive restarts
                if client is not None:
                    thread = await run_as_app_server_client(reporter, client, parser, relay_options.cwd, first_input)
                    typer.echo(f"app-server thread {thread} ended", err=True)
                else:
                    await run_app_server(reporter, lines, parser)
                ignored, skipped = dict(parser.ignored), dict(parser.skipped.counts)
                typer.echo(f"ignored notifications: {ignored}; skipped lines: {skipped}", err=True)
            elif source is Source.CODEX_ROLLOUTS:
                await run_rollouts(reporter, RolloutTailer(rollout_dir, state_file), poll_seconds)
            elif source is Source.CLAUDE_CODE:
                tailer = TranscriptTailer(rollout_dir, state_file, claude_profile, with_events, facts)
                await run_rollouts(reporter, tailer, poll_seconds)
            else:
                skipped_events = await run_events(sink, lines)
                typer.echo(f"skipped lines: {dict(skipped_events.counts)}", err=True)
    finally:
        if client is not None:
            await client.close()
        await sink.close()
    return _summary(reporter, sink, relay)


def _summary(reporter: Reporter, sink: Sink, relay: Relay | None) -> int:
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
    if not isinstance(sink, SpooledSink):
        typer.echo(f"sent {reporter.sent} snapshots", err=True)
        return 0
    rejected = f"rejected {sink.rejected}" + (f" (set aside in {sink.rejected_path})" if sink.rejected else "")
    left = f"left {len(sink.spool)}" + (" (kept for the next run)" if len(sink.spool) else "")
    events = f"; compaction events left {reporter.events_left}" if reporter.events_left else ""
    typer.echo(f"spooled {reporter.sent} snapshots, delivered {sink.delivered}, {rejected}, {left}{events}", err=True)
    return sink.rejected + len(sink.spool) + reporter.events_left
