"""`ctxbudget token`, and the operator token `ctxbudget run` and `ctxbudget api` save: bearer tokens (api/tokens.py)."""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings

OPERATOR_SUBJECT = "local-operator"
OPERATOR_TOKEN_FILE = "operator-token"


def operator_token(settings: Settings, api: ApiSettings | None = None, subject: str = OPERATOR_SUBJECT) -> str:
    """A token that reads everything, for the local operator."""
    api = api or ApiSettings()
    ttl = timedelta(seconds=api.token_ttl_seconds)
    return issue_token(token_secret(settings, api), Role.OPERATOR, subject, ttl=ttl)


def save_operator_token(settings: Settings, api: ApiSettings | None = None) -> Path:
    """A fresh operator token in `<data dir>/operator-token`, readable by its owner only (mode 0600), replacing the
    last one. `ctxbudget run` prints this path, never the token: a terminal's output ends up in logs."""
    path = settings.private_data_dir() / OPERATOR_TOKEN_FILE
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{OPERATOR_TOKEN_FILE}-")  # created 0600
    with os.fdopen(fd, "w") as out:
        out.write(operator_token(settings, api) + "\n")
    os.replace(staging, path)  # atomic: a reader sees the old token or the new one, never half of one
    return path


def operator_token_line(settings: Settings, api: ApiSettings) -> str:
    """What `run` (and `api --operator-token`) prints: where the token is, how long it lasts, how to get another."""
    path = save_operator_token(settings, api)
    hours = api.token_ttl_seconds / 3600
    return f"operator token: {path} (valid {hours:g} h; another: `ctxbudget token --role operator --subject NAME`)"


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
