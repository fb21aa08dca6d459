"""`ctxbudget statusline` and `ctxbudget hook`: commands the agent tools run, reading JSON on stdin.

Both must never get in the tool's way: they exit 0 whatever happens, and say what went wrong on stderr.
- `statusline` prints the line at once, then (with `--api-url`) reports the thread's snapshot through its own spool,
  waiting at most a second: what is not delivered stays spooled and goes out with a later update. Overlapping runs
  do not share the spool: a run that finds it locked leaves reporting to the next update, which is newer anyway. It is
  run after every message: a thread is reported at most at spec 5.1's cadence (`claude_code.statusline.report_due`); a
  run that does not report still delivers what an earlier one left spooled.
- `hook` answers the tool first, when given the API (reporter/hooks/acting.py: tell the agent to write its handoff,
  resume a thread), printing its JSON answer on stdout; then it turns the input into session events: to Kafka when
  `CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS` is set, else appended to `--events-file` (JSON lines that
  `ctxbudget report --from events --input` passes on). PostToolUse runs after every tool call: it asks the API with
  a shorter timeout.
Their state lives in the worker state directory (reporter.worker_state), never in the agent's working directory.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from core.profiles import DEFAULT_CODEX_VERSION, ClaudeCodeProfile
from core.settings import Settings
from reporter.budget_api import HOOK_TIMEOUT_SECONDS, BudgetApi
from reporter.claude_code.statusline import (
    LastReport,
    StatusReports,
    parse_status_input,
    render,
    report_due,
    status_reading,
)
from reporter.delivery.http import HttpDelivery
from reporter.delivery.kafka import KafkaDelivery
from reporter.delivery.spool import Spool
from reporter.delivery.spooled import SpooledDelivery
from reporter.hooks.acting import ANSWERED_EVENTS, Acted, Program, act
from reporter.hooks.actions import POST_TOOL_USE
from reporter.hooks.install import default_program
from reporter.hooks.payload import hook_events, parse_hook_input
from reporter.readings import Identity, Reading, reading_level, to_snapshot
from reporter.tools import Tool
from reporter.worker_state import HOOK_EVENTS, HOOK_STATE, PATCHES, STATUSLINE_SPOOL, state_dir
from schemas import SESSION_EVENT_ADAPTER, SessionEvent

STATUSLINE_DRAIN_SECONDS = 1.0
REPORTS_FILE = "reported.json"
POST_TOOL_USE_TIMEOUT_SECONDS = 1.0
"""PostToolUse runs after every tool call: an API slower than this lets that call's answer go (the next one asks)."""


def statusline(
    api_url: Annotated[str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="Report through the API.")] = None,
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
    node_id: Annotated[str, typer.Option(envvar="CTXBUDGET_NODE_ID")] = "local",
    worker_id: Annotated[str, typer.Option(envvar="CTXBUDGET_WORKER_ID")] = "local",
    project_id: Annotated[str, typer.Option(envvar="CTXBUDGET_PROJECT_ID")] = "local",
    claude_max_output: Annotated[int, typer.Option(min=1)] = ClaudeCodeProfile.max_output_tokens,
    spool_dir: Annotated[Path | None, typer.Option(help="Default: <worker state dir>/statusline-spool.")] = None,
) -> None:
    """Claude Code's status line (settings.json `statusLine`): prints the context line and reports the thread."""
    try:
        status = parse_status_input(sys.stdin.read())
    except ValueError as error:
        typer.echo("ctx: ?")
        typer.echo(f"ctxbudget statusline: unreadable input: {error}", err=True)
        return
    reading = status_reading(status, ClaudeCodeProfile(max_output_tokens=claude_max_output), datetime.now(UTC))
    typer.echo(render(status, reading))
    sys.stdout.flush()
    if api_url is None or reading is None:
        return
    identity = Identity(node_id=node_id, worker_id=worker_id, project_id=project_id)
    try:
        directory = spool_dir or state_dir() / STATUSLINE_SPOOL
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / ".lock").open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            reports = StatusReports.load(directory / REPORTS_FILE)
            level = reading_level(reading, DEFAULT_CODEX_VERSION)
            due = report_due(reports.sessions.get(reading.thread_id), level, reading.observed_at)
            spool = Spool(directory)
            if not due and not len(spool):
                return
            asyncio.run(_report(reading if due else None, identity, spool, HttpDelivery(api_url, token)))
            if due:
                reports.reported(
                    directory / REPORTS_FILE, reading.thread_id, LastReport(at=reading.observed_at, level=level)
                )
    except Exception as error:  # the status line must not fail Claude Code's display
        typer.echo(f"ctxbudget statusline: not reported: {error}", err=True)


async def _report(reading: Reading | None, identity: Identity, spool: Spool, delivery: HttpDelivery) -> None:
    """Spool the reading's snapshot (when one is due) and deliver what the spool holds, for at most a second."""
    spooled = SpooledDelivery(spool, delivery, drain_seconds=STATUSLINE_DRAIN_SECONDS)
    await spooled.start()
    try:
        if reading is not None:
            await spooled.send_snapshot(to_snapshot(reading, identity, DEFAULT_CODEX_VERSION))
    finally:
        await spooled.close()


def hook(
    tool: Annotated[
        Tool, typer.Option(help="Which tool runs the hook (both read the same answers; it names the caller).")
    ] = Tool.CLAUDE,
    api_url: Annotated[
        str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="Ask the API what the thread owes, and act.")
    ] = None,
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
    resume_package: Annotated[
        str | None,
        typer.Option(envvar="CTXBUDGET_RESUME_PACKAGE", help="SessionStart of a relay thread: resume from this."),
    ] = None,
    state_file: Annotated[
        Path | None, typer.Option(help="What the hooks did (default: <worker state dir>/hooks-state.json).")
    ] = None,
    events_file: Annotated[
        Path | None,
        typer.Option(help="Without Kafka: append the events here (default: <worker state dir>/hooks.jsonl)."),
    ] = None,
    project_id: Annotated[str | None, typer.Option(envvar="CTXBUDGET_PROJECT_ID")] = None,
) -> None:
    """A Claude Code or Codex hook (PreCompact, PostCompact, SessionStart, Stop, UserPromptSubmit, PostToolUse):
    with `--api-url`, answers for a thread that owes a handoff (reporter/hooks/actions.py); always reports compaction
    facts."""
    del tool  # accepted as the installed commands name it: both tools read the same answers
    try:
        hook_input = parse_hook_input(sys.stdin.buffer.read())
    except ValueError as error:
        typer.echo(f"ctxbudget hook: unreadable input: {error}", err=True)
        return
    settings = Settings()
    if api_url:
        timeout = POST_TOOL_USE_TIMEOUT_SECONDS if hook_input.event_name == POST_TOOL_USE else HOOK_TIMEOUT_SECONDS
        # the agent's shell has the tool's environment: the URL goes into the instruction only when it is not there
        program = Program(default_program(), None if api_url == os.environ.get("CTXBUDGET_API_URL") else api_url)
        try:
            path = state_file or state_dir(settings) / HOOK_STATE
            api = BudgetApi(api_url, token, timeout)
            acted = act(hook_input, api, path, resume_package, program, state_dir(settings) / PATCHES)
        except Exception as error:  # a hook never fails the agent: an unexpected fault lets the tool go on
            acted = Acted(notes=[f"not acted: {error!r}"])
        for note in acted.notes:
            typer.echo(f"ctxbudget hook: {note}", err=True)
        if acted.output is not None:
            typer.echo(json.dumps(acted.output))
            sys.stdout.flush()
    elif hook_input.event_name in ANSWERED_EVENTS:
        typer.echo("ctxbudget hook: no --api-url / CTXBUDGET_API_URL: reporting only, not acting", err=True)
    events = hook_events(hook_input, datetime.now(UTC), project_id)
    if not events:
        return
    try:
        if settings.kafka_bootstrap_servers:
            asyncio.run(_to_kafka(events, KafkaDelivery(settings.kafka_bootstrap_servers, settings.topic_prefix)))
        else:
            append_events(events_file or state_dir(settings) / HOOK_EVENTS, events)
    except Exception as error:
        typer.echo(f"ctxbudget hook: not reported: {error}", err=True)


def append_events(path: Path, events: list[SessionEvent]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        for event in events:
            handle.write(SESSION_EVENT_ADAPTER.dump_json(event) + b"\n")


async def _to_kafka(events: list[SessionEvent], delivery: KafkaDelivery) -> None:
    await delivery.start()
    try:
        for event in events:
            await delivery.send_event(event)
    finally:
        await delivery.close()
