"""`ctxbudget hook`: the command both agent tools run as their hooks, reading JSON on stdin.

It must never get in the tool's way: it exits 0 whatever happens, and says what went wrong on stderr. It answers the
tool first, when given the API (reporter/hooks/acting.py: tell the agent to write its handoff, resume a thread),
printing its JSON answer on stdout; then it turns the input into session events: to Kafka when
`CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS` is set, else appended to `--events-file` (JSON lines that
`ctxbudget report --from events --input` passes on). PostToolUse runs after every tool call: it asks the API with a
shorter timeout. Its state lives in the worker state directory (reporter.worker_state), never in the agent's working
directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from core.settings import Settings
from reporter.budget_api import HOOK_TIMEOUT_SECONDS, BudgetApi
from reporter.delivery.kafka import KafkaDelivery
from reporter.hooks.acting import ANSWERED_EVENTS, Acted, Program, act
from reporter.hooks.actions import POST_TOOL_USE
from reporter.hooks.install import default_program
from reporter.hooks.payload import hook_events, parse_hook_input
from reporter.tools import Tool
from reporter.worker_state import HOOK_EVENTS, HOOK_STATE, PATCHES, state_dir
from schemas import SESSION_EVENT_ADAPTER, SessionEvent

POST_TOOL_USE_TIMEOUT_SECONDS = 1.0
"""PostToolUse runs after every tool call: an API slower than this lets that call's answer go (the next one asks)."""


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
