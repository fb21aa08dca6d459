"""`ctxbudget statusline`: Claude Code's status line (settings.json `statusLine`), reading JSON on stdin.

It must never get in the tool's way: it exits 0 whatever happens, and says what went wrong on stderr. It prints the
line at once, then (with `--api-url`) reports the thread's snapshot through its own spool, waiting at most a second:
what is not delivered stays spooled and goes out with a later update. Overlapping runs do not share the spool: a run
that finds it locked leaves reporting to the next update, which is newer anyway. It is run after every message: a
thread is reported at most at spec 5.1's cadence (`statusline.report_due`); a run that does not report still delivers
what an earlier one left spooled. Its state lives in the worker state directory (reporter.worker_state), never in the
agent's working directory.
"""

from __future__ import annotations

import asyncio
import fcntl
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from core.profiles import DEFAULT_CODEX_VERSION, ClaudeCodeProfile
from reporter.claude_code.statusline import (
    LastReport,
    StatusReports,
    parse_status_input,
    render,
    report_due,
    status_reading,
)
from reporter.delivery.http import HttpDelivery
from reporter.delivery.spool import Spool
from reporter.delivery.spooled import SpooledDelivery
from reporter.readings import Identity, Reading, reading_level, to_snapshot
from reporter.worker_state import STATUSLINE_SPOOL, state_dir

STATUSLINE_DRAIN_SECONDS = 1.0
REPORTS_FILE = "reported.json"


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
