"""`ctxbudget mcp`: the MCP server over stdio, for a master agent (Claude Code, Codex) on the same machine.

It calls the API over HTTP with one token, so it needs no database or broker of its own: embedded chdb allows one
process per data path, and that process is the API's. The token comes from `--token-file`, else
`CTXBUDGET_API_TOKEN`, else the operator token `ctxbudget run` writes to `<data dir>/operator-token`; a file is read
again for each call, so a token `run` replaces on restart is picked up without restarting the agent.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

TOKEN_ENV = "CTXBUDGET_API_TOKEN"


def mcp(
    api_url: Annotated[
        str | None,
        typer.Option(envvar="CTXBUDGET_API_URL", help="The API (default: the local one, CTXBUDGET_API_HOST/PORT)."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help=f"A file holding the bearer token (default: ${TOKEN_ENV}, else <data dir>/operator-token)."),
    ] = None,
) -> None:
    """Serve the master's MCP tools and resources on stdin/stdout (logs go to stderr)."""
    import anyio

    from api.cli import OPERATOR_TOKEN_FILE
    from api.settings import ApiSettings
    from core.settings import Settings

    api = ApiSettings()
    url = api_url or f"http://{api.host}:{api.port}"
    token = os.environ.get(TOKEN_ENV) if token_file is None else None
    path = token_file or Settings().resolved_data_dir / OPERATOR_TOKEN_FILE
    if token is None and not path.is_file():
        typer.echo(f"error: no token: {path} does not exist and {TOKEN_ENV} is not set", err=True)
        raise typer.Exit(2)
    # The MCP SDK logs at INFO on stderr, where the HTTP client would add a line for every tool call.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    anyio.run(_serve, url, token, path)


async def _serve(url: str, token: str | None, path: Path) -> None:
    import httpx2

    from api.mcp_server.rest import RestApi
    from api.mcp_server.tools import build_server

    def token_of(_: object) -> str:
        return token if token is not None else path.read_text().strip()

    async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
        await build_server(RestApi(http, token_of)).run_stdio_async()
