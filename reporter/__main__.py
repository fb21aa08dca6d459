"""`python -m reporter`: the worker-side commands alone (`report`, `statusline`, `hook`), without loading the pipeline's
(the `ctxbudget` command also imports the API and the stream processors)."""

from __future__ import annotations

import typer

from reporter.agent_commands import hook, statusline
from reporter.cli import report

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Report agent threads' context budgets.")
app.command("report")(report)
app.command("statusline")(statusline)
app.command("hook")(hook)

if __name__ == "__main__":
    app()
