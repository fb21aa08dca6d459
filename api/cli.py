"""`ctxbudget api` and `ctxbudget token`: serve the API on its own, and issue bearer tokens (api/tokens.py)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Annotated

import typer

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from streams.settings import Settings

OPERATOR_SUBJECT = "local-operator"


def operator_token(settings: Settings, api: ApiSettings | None = None, subject: str = OPERATOR_SUBJECT) -> str:
    """A token that reads everything: what `ctxbudget run` prints for the local operator."""
    api = api or ApiSettings()
    ttl = timedelta(seconds=api.token_ttl_seconds)
    return issue_token(token_secret(settings, api), Role.OPERATOR, subject, ttl=ttl)


def token(
    role: Annotated[Role, typer.Option(help="worker: reports as --subject; user: reads --project(s); operator: all.")],
    subject: Annotated[str, typer.Option(help="The worker id (role worker) or the user id.")],
    project: Annotated[list[str] | None, typer.Option(help="A project the token may see (repeatable).")] = None,
    ttl_days: Annotated[float | None, typer.Option(help="Lifetime (default CTXBUDGET_API_TOKEN_TTL_SECONDS).")] = None,
) -> None:
    """Print a signed bearer token for the API."""
    settings, api = Settings(), ApiSettings()
    ttl = timedelta(days=ttl_days) if ttl_days is not None else timedelta(seconds=api.token_ttl_seconds)
    try:
        typer.echo(issue_token(token_secret(settings, api), role, subject, project or (), ttl=ttl))
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error


def run_api(settings: Settings, api: ApiSettings, print_operator_token: bool) -> None:
    """Topics and migrations in place, then the API on api.host:api.port until interrupted."""
    from api.server import serve
    from sinks.clickhouse import connect
    from sinks.migrations import migrate
    from streams.topics import ensure_topics

    if print_operator_token:
        typer.echo(f"operator token: {operator_token(settings, api)}")
    client = connect(settings.clickhouse_url)
    try:
        migrate(client)
        asyncio.run(ensure_topics(settings))
        typer.echo(f"api: http://{api.host}:{api.port} (OpenAPI at /docs and /openapi.json)")
        asyncio.run(serve(settings, client, api))
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
