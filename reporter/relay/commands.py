"""`ctxbudget handoff ...`: the handoff packages of a worker's threads, from the command line.

`write` is what the agent runs when a hook tells it to: its part of the package on stdin (reporter.relay.write). It
needs only what the tool's environment holds (`CTXBUDGET_API_URL`, `CTXBUDGET_WORKER_TOKEN`): the API says the
thread's project and compaction cycle.

`resume` starts the next thread: it prints the resume prompt (reporter.relay.resume) and marks the package consumed by
that thread, through the API with the worker's token (it may read and consume the packages of the threads it
reports). The prompt is printed only once the package is the new thread's: a package another thread took over, or
one not ready, is refused with the reason, so two threads never continue the same work.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from reporter.budget_api import ApiUnavailable, BudgetApi
from reporter.delivery.http import HttpDelivery
from reporter.delivery.spool import LOCK_NAME
from reporter.readings import Identity
from reporter.relay.agent_handoff import AgentHandoff
from reporter.relay.inbox import cycle_of
from reporter.relay.resume import resume_prompt
from reporter.relay.write import RelayPaths, leave_part, write_handoff
from reporter.worker_state import HANDOFF_WRITE, PATCHES, state_dir
from schemas import HandoffPackage, PackageStatus

handoff_app = typer.Typer(help="Handoff packages of this worker's threads (spec 3.3): resume the next thread from one.")


@handoff_app.command("resume")
def resume(
    to_thread: Annotated[str, typer.Option("--to-thread", help="The new thread that takes the work over.")],
    package_id: Annotated[str | None, typer.Option("--package", help="The handoff package.")] = None,
    from_thread: Annotated[
        str | None, typer.Option("--from-thread", help="Or: the thread handed off (its current package).")
    ] = None,
    api_url: Annotated[str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="The API.")] = None,
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
) -> None:
    """Print the resume prompt for TO_THREAD and mark the package consumed by it."""
    if (package_id is None) == (from_thread is None):
        raise typer.BadParameter("give --package or --from-thread (one of them)")
    if not api_url:
        raise typer.BadParameter("give --api-url, or set CTXBUDGET_API_URL")
    api = BudgetApi(api_url, token)
    try:
        package = api.package(package_id) if package_id else api.thread_package(from_thread or "")
        if package is None:
            _fail(f"no handoff package {package_id}" if package_id else f"no handoff package for thread {from_thread}")
        consumed = _take_over(api, package, to_thread)
    except ApiUnavailable as error:
        _fail(str(error))
    typer.echo(resume_prompt(consumed, state_dir() / PATCHES), nl=False)
    typer.echo(f"handoff package {consumed.handoff_package_id} consumed by {to_thread}", err=True)


def _take_over(api: BudgetApi, package: HandoffPackage, to_thread: str) -> HandoffPackage:
    if package.package_status is PackageStatus.CONSUMED and package.to_thread_id == to_thread:
        return package  # resumed before: the same answer
    if package.package_status is not PackageStatus.READY:
        taken = f" by {package.to_thread_id}" if package.to_thread_id else ""
        _fail(f"handoff package {package.handoff_package_id} is {package.package_status.value}{taken}: not resumable")
    return api.consume(package.handoff_package_id, to_thread)


def _fail(message: str) -> NoReturn:
    typer.echo(f"ctxbudget handoff resume: {message}", err=True)
    raise typer.Exit(1)


@handoff_app.command("write")
def write(
    thread: Annotated[str, typer.Option("--thread", help="The thread handing off (the hook names it).")],
    api_url: Annotated[str, typer.Option(envvar="CTXBUDGET_API_URL", help="The API.")],
    token: Annotated[str | None, typer.Option(envvar="CTXBUDGET_WORKER_TOKEN", help="API bearer token.")] = None,
    project_id: Annotated[
        str | None,
        typer.Option(envvar="CTXBUDGET_PROJECT_ID", help="The thread's project (default: the API's answer for it)."),
    ] = None,
    task_id: Annotated[str | None, typer.Option(envvar="CTXBUDGET_TASK_ID", help="The thread's task.")] = None,
    cwd: Annotated[Path, typer.Option(help="The thread's working directory (git facts).")] = Path(),
    since: Annotated[
        datetime | None, typer.Option(help="When the thread began: commits since are its completed patches.")
    ] = None,
    spool_dir: Annotated[
        Path | None,
        typer.Option(help="What the API did not take yet (default: <worker state dir>/handoff-write)."),
    ] = None,
) -> None:
    """Read {"summary", "open_questions", "next_actions", "decision_links"} on stdin; post the thread's package."""
    try:
        agent = AgentHandoff.model_validate_json(sys.stdin.buffer.read())
    except ValidationError as error:
        typer.echo(f"ctxbudget handoff write: stdin is not the handoff shape: {error}", err=True)
        raise typer.Exit(2) from error
    shared = state_dir()
    paths = RelayPaths(spool_dir or shared / HANDOFF_WRITE, shared)
    now = _now()
    detail, unknown = _thread_detail(BudgetApi(api_url, token), thread)
    project = project_id or (detail or {}).get("project_id")
    with held(paths.spool_dir):  # several agents may write at once: one outbox, one writer at a time
        leave_part(paths, thread, agent, cycle_of(detail) if detail else None, now)  # found by the relay, posted or not
        if not project:
            typer.echo(
                f"ctxbudget handoff write: {unknown}; your part is kept in {paths.inbox.path(thread)}, where the"
                " reporter's relay puts it in the thread's package (or run this again with --project-id)",
                err=True,
            )
            raise typer.Exit(1)
        identity = Identity(node_id="", worker_id="", project_id=project, task_id=task_id)
        since_utc = since.replace(tzinfo=since.tzinfo or UTC) if since else None
        delivery = HttpDelivery(api_url, token)
        package, left = asyncio.run(
            write_handoff(agent, identity, thread, cwd.resolve(), since_utc, paths, delivery, now)
        )
    typer.echo(f"handoff package {package.handoff_package_id} of {thread}: {package.package_status.value}", err=True)
    if left:
        typer.echo(f"ctxbudget handoff write: {left} versions kept in {paths.spool_dir} for the next run", err=True)
        raise typer.Exit(1)


def _thread_detail(api: BudgetApi, thread: str) -> tuple[dict[str, Any] | None, str]:
    """The thread's 6.3 detail (its project and compaction cycle), or None with why not."""
    try:
        detail = api.thread_detail(thread)
    except ApiUnavailable as error:
        return None, f"the API could not say thread {thread}'s project: {error}"
    return detail, f"the API does not know thread {thread} (not reported yet?)"


@contextlib.contextmanager
def held(directory: Path) -> Iterator[None]:
    """An exclusive lock on `directory`, waited for."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / LOCK_NAME).open("ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _now() -> datetime:
    return datetime.now(UTC)
