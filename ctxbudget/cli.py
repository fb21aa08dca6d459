"""`ctxbudget`: the one command line. The worker's commands (the reporter's) run on the base install; the pipeline's
(streams/cli.py: run, api, migrate, kafka, topics, ...) come with the `pipeline` extra, and without it the command line
says which extra to install instead of failing on an import."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from importlib.util import find_spec

import typer
from typer.core import TyperCommand, TyperGroup

from reporter.claude_code.statusline_command import statusline
from reporter.cli import report
from reporter.hooks.commands import hook
from reporter.hooks.install import hooks_app
from reporter.relay.commands import handoff_app

PIPELINE_MODULES = ("faust", "chdb", "clickhouse_connect", "fastapi", "uvicorn")
"""What the `pipeline` extra installs that the pipeline's commands import."""
PIPELINE_INSTALL = "pip install 'ctxbudget[pipeline]'"


def missing_pipeline_modules() -> list[str]:
    return [name for name in PIPELINE_MODULES if not _importable(name)]


def _importable(name: str) -> bool:
    if name in sys.modules:  # faust, once imported, is a lazy module without the __spec__ find_spec asks for
        return sys.modules[name] is not None
    return find_spec(name) is not None


class WorkerCommands(TyperGroup):
    """The commands of a base install. Any other name is a pipeline command (or a typo): the error names the extra."""

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | TyperGroup | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and not ctx.resilient_parsing:
            missing = ", ".join(missing_pipeline_modules())
            ctx.fail(
                f"no worker command {cmd_name!r}. The pipeline's commands (run, api, migrate, kafka, topics, ...) "
                f"need the pipeline extra, not installed here ({missing} missing): {PIPELINE_INSTALL}"
            )
        return command


WORKER_COMMANDS = frozenset({"report", "statusline", "hook", "handoff", "hooks"})


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    """The command line for `argv` (default: this process's arguments). A run of a worker command loads none of
    the pipeline (Faust, ClickHouse, the API: about half the process's memory): the reporter stays up beside the
    agents for hours, and `statusline` and `hook` start on every prompt."""
    args = sys.argv[1:] if argv is None else argv
    worker_only = bool(args) and args[0] in WORKER_COMMANDS
    with_pipeline = not worker_only and not missing_pipeline_modules()
    app = typer.Typer(
        help="Context-budget stream pipeline and its worker reporter.",
        no_args_is_help=True,
        add_completion=False,
        cls=TyperGroup if with_pipeline else WorkerCommands,
    )
    app.command("report")(report)
    app.command("statusline")(statusline)
    app.command("hook")(hook)
    app.add_typer(handoff_app, name="handoff")
    app.add_typer(hooks_app, name="hooks")
    if with_pipeline:
        from streams.cli import app as pipeline

        app.add_typer(pipeline)  # no name: its commands and groups join these at the top level
    return app


def __getattr__(name: str) -> typer.Typer:
    """`app`: the whole command line, as tests and embedders import it (built on first use, so that importing this
    module loads nothing of the pipeline; `main` builds only what its arguments need)."""
    if name == "app":
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _whole_app() -> typer.Typer:
    return build_app([])


def main() -> None:
    sys.exit(build_app()())
