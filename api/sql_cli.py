"""`ctxbudget sql "SELECT ..."`: a query through the running API's `POST /api/v1/sql` (the process that owns the
database), printed as ClickHouse formats it."""

from __future__ import annotations

import sys
from typing import Annotated

import httpx
import typer

from api.settings import ApiSettings
from api.sql import SqlFormat


def sql(
    query: Annotated[str, typer.Argument(help="One read-only statement; `-` reads it from stdin.")],
    format: Annotated[SqlFormat, typer.Option(help="json (JSONEachRow), csv or tsv (with column names).")] = (
        SqlFormat.TSV
    ),
    api_url: Annotated[
        str | None, typer.Option(help="The API (default http://CTXBUDGET_API_HOST:CTXBUDGET_API_PORT).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="CTXBUDGET_API_TOKEN",
            help="An operator token (default: one signed with this data dir's secret, as `ctxbudget token` does).",
        ),
    ] = None,
) -> None:
    """Run a read-only SQL query on the running pipeline's ClickHouse (operator token)."""
    from api.cli import operator_token
    from core.settings import Settings

    api = ApiSettings()
    url = api_url or f"http://{api.host}:{api.port}"
    bearer = token or operator_token(Settings(), api, subject="sql-cli")
    text = sys.stdin.read() if query == "-" else query
    try:
        answer = httpx.post(
            f"{url.rstrip('/')}/api/v1/sql",
            params={"format": format.value},
            content=text.encode(),
            headers={"Authorization": f"Bearer {bearer}", "Content-Type": "text/plain; charset=utf-8"},
            timeout=api.sql_max_execution_seconds + 30,
        )
    except httpx.HTTPError as error:
        typer.echo(f"error: {url}: {error}", err=True)
        raise typer.Exit(2) from error
    if answer.is_error:
        typer.echo(f"error: {answer.status_code}: {_detail(answer)}", err=True)
        raise typer.Exit(1)
    sys.stdout.buffer.write(answer.content)
    sys.stdout.flush()


def _detail(answer: httpx.Response) -> str:
    try:
        return str(answer.json()["detail"])
    except (ValueError, KeyError, TypeError):
        return answer.text
