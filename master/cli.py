"""`ctxbudget master`: the example master, a client of `ctxbudget mcp` over stdio (the MCP SDK's client)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, TextIO

import typer

from master.driver import Master, Responder, RoundReport, Tools


def master(
    api_url: Annotated[
        str | None, typer.Option(envvar="CTXBUDGET_API_URL", help="The API the MCP server calls (default: local).")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="The bearer token's file (default: as `ctxbudget mcp`).")
    ] = None,
    project: Annotated[list[str] | None, typer.Option(help="Only this project (repeatable; default: all).")] = None,
    interval: Annotated[float, typer.Option(help="Seconds between rounds.")] = 5.0,
    rounds: Annotated[int, typer.Option(help="Rounds to run (0: until interrupted).")] = 0,
) -> None:
    """Drive spec 8.2 over MCP: each round request handoffs in priority order and consume finished packages into
    relay threads; one JSON line per round (requested, consumed, errors). Real workers prepare the packages."""
    import anyio
    import orjson

    def show(report: RoundReport) -> None:
        typer.echo(orjson.dumps(report.__dict__).decode())

    anyio.run(drive, mcp_command(api_url, token_file), None, project, interval, rounds, show)


def mcp_command(api_url: str | None, token_file: Path | None) -> list[str]:
    """`ctxbudget mcp` in this interpreter, with the same options."""
    command = [sys.executable, "-m", "streams", "mcp"]
    command += ["--api-url", api_url] if api_url else []
    command += ["--token-file", str(token_file)] if token_file else []
    return command


@contextlib.asynccontextmanager
async def connected(command: list[str], errlog: TextIO = sys.stderr) -> AsyncIterator[Tools]:
    """An initialized MCP session with the server `command` starts (stdio); its log lines go to `errlog`."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params, errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Tools(session)


async def drive(
    command: list[str],
    responder: Responder | None,
    projects: list[str] | None,
    interval: float,
    rounds: int,
    show: Callable[[RoundReport], None],
    errlog: TextIO = sys.stderr,
) -> None:
    import anyio

    async with connected(command, errlog) as tools:
        master = Master(tools, responder, projects)
        while rounds == 0 or master.round < rounds:
            show(await master.run_round())
            await anyio.sleep(interval)
