"""The pipeline's commands of `ctxbudget` (the `pipeline` extra); ctxbudget/cli.py, the entry, adds the worker's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli import token
from api.mcp_server.stdio import mcp
from api.sql_cli import sql
from core.settings import Settings
from master.cli import master
from streams.topology_graph import GraphFormat

if TYPE_CHECKING:
    import faust
    from clickhouse_connect.driver.client import Client

    from api.settings import ApiSettings

app = typer.Typer(help="Context-budget stream pipeline.", no_args_is_help=True, add_completion=False)
kafka_app = typer.Typer(help="The local Apache Kafka broker (KRaft, 127.0.0.1), for development and tests.")
app.add_typer(kafka_app, name="kafka")
app.command("token")(token)
app.command("sql")(sql)
app.command("mcp")(mcp)
app.command("master")(master)
topics_app = typer.Typer(help="The topology's topics: create them as declared, or show how they differ.")
app.add_typer(topics_app, name="topics")


def _local_kafka(settings: Settings):
    from streams.local_kafka import LocalKafka

    return LocalKafka(settings.resolved_data_dir / "kafka", settings.kafka_version, settings.kafka_cache_dir)


@kafka_app.command("fetch")
def kafka_fetch() -> None:
    """Resolve the broker's jars from Maven Central into the cache (once; `up` does it too when needed)."""
    from streams.local_kafka import LocalKafkaError, ensure_jars

    settings = Settings()
    try:
        libs = ensure_jars(settings.kafka_version, settings.kafka_cache_dir)
    except LocalKafkaError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    typer.echo(str(libs))


@kafka_app.command("up")
def kafka_up(port: Annotated[int | None, typer.Option(help="Broker port (default: a free one).")] = None) -> None:
    """Fetch the jars if needed, start the broker, wait until it answers, print its bootstrap address."""
    from streams.local_kafka import LocalKafkaError

    try:
        bootstrap = _local_kafka(Settings()).up(port=port)
    except LocalKafkaError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    typer.echo(bootstrap)


@kafka_app.command("down")
def kafka_down() -> None:
    """Stop the local broker (its data stays for the next `up`)."""
    stopped = _local_kafka(Settings()).down()
    typer.echo("stopped" if stopped else "not running")


@kafka_app.command("status")
def kafka_status() -> None:
    """Print the local broker's state as JSON; exit 1 when it is not running."""
    status = _local_kafka(Settings()).status()
    typer.echo(status.as_json())
    if not status.running:
        raise typer.Exit(1)


@app.command()
def migrate() -> None:
    """Apply pending ClickHouse migrations (idempotent) to CTXBUDGET_CLICKHOUSE_DSN."""
    from sinks.clickhouse import connect
    from sinks.migrations import migrate as apply

    settings = Settings()
    client = connect(settings.clickhouse_url)
    try:
        done = apply(client)
    finally:
        client.close()
    typer.echo("\n".join(f"applied {m.version}: {m.name}" for m in done) or "up to date")


@app.command()
def run(
    api: Annotated[
        bool | None,
        typer.Option(
            help="Serve the HTTP API and web page in the worker (it owns embedded chdb). Default: if it runs the sinks."
        ),
    ] = None,
    simulate: Annotated[
        float | None, typer.Option(help="Also feed a simulated fleet at this many records per second.")
    ] = None,
) -> None:
    """Run the pipeline on embedded defaults: local Kafka (unless configured), topics, ClickHouse migrations, the
    worker with its sinks, and the API with the web page. With CTXBUDGET_ROLES set, only those parts of the worker.

    Runs until interrupted. A local broker this command started is stopped again on exit.
    """
    from streams.local_kafka import LocalKafka

    settings = Settings()
    started: LocalKafka | None = None
    if not settings.kafka_bootstrap_servers:
        local = _local_kafka(settings)
        if local.pid() is None:
            started = local
        settings = settings.model_copy(update={"kafka_bootstrap_servers": local.up()})
    try:
        _run_worker(settings, serve_api="sinks" in settings.roles if api is None else api, simulate_rate=simulate)
    finally:
        if started is not None:
            started.down()


def _run_worker(settings: Settings, serve_api: bool, simulate_rate: float | None) -> None:
    import asyncio

    from core.logs import logging_config
    from sinks.clickhouse import connect
    from sinks.migrations import apply_history_ttl
    from sinks.migrations import migrate as apply
    from streams.runtime.app import Worker
    from streams.topic_admin import create, declared_topics, topology_tables
    from streams.worker import build

    # The tables' changelogs too: left to Faust, they appear while its first rebalance runs, which logs them missing.
    created = asyncio.run(create(settings, declared_topics(settings, topology_tables(settings))))
    # The worker owns the one client for its whole life (chdb: one process per data path); the sinks write and the
    # API reads through it. A worker with neither opens none, so it can run beside the one that owns chdb.
    client = connect(settings.clickhouse_url) if serve_api or "sinks" in settings.roles else None
    try:
        typer.echo(f"kafka: {settings.kafka_bootstrap_servers} (created {len(created)} topics)")
        if client is not None:
            applied = apply(client)
            apply_history_ttl(client, settings.clickhouse_history_ttl_days)
            typer.echo(f"clickhouse: {settings.clickhouse_url} ({len(applied)} migrations applied)")
        typer.echo(f"roles: {', '.join(settings.role_list)} (consumer group {settings.faust_app_id})")
        pipeline = build(settings, clickhouse=client)
        if client is not None and serve_api:
            _serve_api_in(pipeline, settings, client)
        if simulate_rate is not None:
            _simulate_in(pipeline, settings, simulate_rate)
        _print_progress_in(pipeline, settings)
        logs = logging_config(settings.log_level, settings.log_format)
        worker = Worker(
            pipeline,
            loglevel=settings.log_level,
            quiet=True,
            logging_config=logs,
            shutdown_seconds=settings.shutdown_seconds,
        )
        try:
            worker.execute_from_commandline()
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
    finally:
        if client is not None:
            client.close()


def _to_terminal(line: str) -> None:
    """Print from inside the running worker: Faust has redirected sys.stdout into the log by then, and the person who
    started `run` reads the terminal."""
    typer.echo(line, file=sys.__stdout__)


def _print_progress_in(pipeline: faust.App, settings: Settings) -> None:
    """A line of progress on the terminal every `progress_seconds`."""
    from time import monotonic

    from streams.console import Reading, progress_line

    before, since = Reading.read(), monotonic()

    @pipeline.timer(settings.progress_seconds, name="print_progress")
    async def print_progress() -> None:
        nonlocal before, since
        now, at = Reading.read(), monotonic()
        _to_terminal(progress_line(before, now, at - since))
        before, since = now, at


def _serve_api_in(pipeline: faust.App, settings: Settings, client: Client) -> None:
    """The API as a task of the worker: same event loop, same ClickHouse client; stopped with the worker."""
    from api.cli import operator_token_line
    from api.server import serve
    from api.settings import ApiSettings

    api_settings = ApiSettings()
    typer.echo(operator_token_line(settings, api_settings))

    def announce(url: str) -> None:  # once bound: with port 0 the port is known only then
        _to_terminal(f"web page and API: {url}/ (OpenAPI at /docs)")

    @pipeline.task
    async def serve_api() -> None:
        await serve(settings, client, api_settings, announce)


def _simulate_in(pipeline: faust.App, settings: Settings, rate: float) -> None:
    """Live simulated traffic from inside the worker, so a newcomer sees the fleet move."""
    from datetime import UTC, datetime

    from streams.simulator import SimulationConfig, live_traffic, produce

    threads = 50
    # A turn sends at least one record per thread, so at `rate` a turn takes at least threads / rate real seconds: the
    # pace the fleet's forecasts assume. The times themselves are the clock's (`live_traffic`), never ahead of it.
    config = SimulationConfig(
        start=datetime.now(UTC), threads=threads, projects=3, turns_per_thread=200, turn_seconds=threads / rate
    )
    typer.echo(f"simulating {config.threads} threads in {config.projects} projects at {rate:g} records/s")

    @pipeline.task
    async def simulate_fleet() -> None:
        await produce(live_traffic(config), str(settings.kafka_bootstrap_servers), settings.topic_prefix, rate)


@app.command()
def simulate(
    threads: Annotated[int, typer.Option(help="Agent threads in the fleet.")] = 20,
    projects: Annotated[int, typer.Option(help="Projects the threads belong to.")] = 3,
    turns: Annotated[int, typer.Option(help="Snapshots per thread from its primary source.")] = 40,
    seed: Annotated[int, typer.Option(help="Same seed, same traffic.")] = 0,
    rate: Annotated[float | None, typer.Option(help="Records per second (default: as fast as possible).")] = None,
    duplicate_rate: float = 0.02,
    late_rate: float = 0.02,
    invalid_rate: float = 0.01,
) -> None:
    """Produce realistic fleet traffic (budgets shrinking by turns, compactions, handoffs, bad records) to Kafka, with
    the conversations that show it; every time is the wall clock's at sending."""
    import asyncio
    from datetime import UTC, datetime

    from streams.simulator import SimulationConfig, live_traffic, produce
    from streams.topic_admin import ensure_topics

    settings = _with_broker(Settings())
    config = SimulationConfig(
        start=datetime.now(UTC),  # live traffic: package TTLs and forecasts are measured against the wall clock
        threads=threads,
        projects=projects,
        turns_per_thread=turns,
        seed=seed,
        duplicate_rate=duplicate_rate,
        late_rate=late_rate,
        invalid_rate=invalid_rate,
    )
    asyncio.run(ensure_topics(settings))
    sent = asyncio.run(produce(live_traffic(config), settings.kafka_bootstrap_servers, settings.topic_prefix, rate))
    typer.echo(f"sent {sent} records to {settings.kafka_bootstrap_servers}")


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Listen address (default CTXBUDGET_API_HOST or 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default CTXBUDGET_API_PORT or 8080).")] = None,
    operator_token: Annotated[
        bool,
        typer.Option(help="Write a locally signed operator token to <data dir>/operator-token (0600), print its path."),
    ] = False,
) -> None:
    """Serve the HTTP API (spec 5.2, 6) over Kafka and ClickHouse until interrupted.

    With embedded chdb only one process may open the database: use it when the pipeline runs elsewhere.
    """
    from api.settings import ApiSettings

    settings = _with_broker(Settings())
    overrides = {name: value for name, value in (("host", host), ("port", port)) if value is not None}
    _run_api(settings, ApiSettings(**overrides), operator_token)


def _run_api(settings: Settings, api: ApiSettings, save_token: bool) -> None:
    """Topics and migrations in place, then the API on api.host:api.port until interrupted."""
    import asyncio

    from api.cli import operator_token_line
    from api.server import serve
    from core.logs import configure_logging
    from sinks.clickhouse import connect
    from sinks.migrations import migrate
    from streams.topic_admin import ensure_topics

    configure_logging(settings.log_level, settings.log_format)
    if save_token:
        typer.echo(operator_token_line(settings, api))
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


@topics_app.command("create")
def topics_create() -> None:
    """Create every declared topic (inputs, outputs, table changelogs) that does not exist yet; idempotent."""
    import asyncio

    from streams.topic_admin import create, declared_topics, topology_tables

    settings = _with_broker(Settings())
    created = asyncio.run(create(settings, declared_topics(settings, topology_tables(settings))))
    typer.echo("\n".join(f"created {name}" for name in created) or "up to date")


@topics_app.command("describe")
def topics_describe() -> None:
    """Compare every declared topic with the broker's: partitions, cleanup policy, retention. Exit 1 on drift."""
    import asyncio

    from streams.topic_admin import declared_topics, describe, topology_tables

    settings = _with_broker(Settings())
    drifts = asyncio.run(describe(settings, declared_topics(settings, topology_tables(settings))))
    for drift in drifts:
        typer.echo(f"{drift.topic}: {drift.setting}: declared {drift.declared}, actual {drift.actual or 'missing'}")
    if drifts:
        raise typer.Exit(1)
    typer.echo("no drift")


@app.command()
def topology(
    format: Annotated[GraphFormat, typer.Option(help="text, or mermaid (a flowchart).")] = GraphFormat.TEXT,
    readme: Annotated[
        Path | None, typer.Option(help="Rewrite this file's marked topology block with the mermaid graph instead.")
    ] = None,
) -> None:
    """The declared topology (core/folds.py): topic -> fold -> table -> topic, by role."""
    from streams.topology_graph import readme_block, render, with_readme_block

    if readme is None:
        typer.echo(render(format), nl=False)
        return
    try:
        readme.write_text(with_readme_block(readme.read_text(), readme_block()))
    except (OSError, ValueError) as error:
        typer.echo(f"error: {readme}: {error}", err=True)
        raise typer.Exit(1) from error
    typer.echo(f"updated {readme}")


@app.command()
def status(as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False) -> None:
    """Consumer-group lag per topic and partition, stale threads and the sinks' backlog."""
    import asyncio

    from rich import print as rich_print

    from streams.status import as_json as status_json
    from streams.status import collect, render

    report = asyncio.run(collect(_with_broker(Settings())))
    if as_json:
        typer.echo(status_json(report))
    else:
        rich_print(render(report))


def _with_broker(settings: Settings) -> Settings:
    """The configured broker, else the local one `ctxbudget kafka up` started; exits with a message when neither."""
    if settings.kafka_bootstrap_servers:
        return settings
    bootstrap = _local_kafka(settings).status().bootstrap
    if bootstrap is None:
        typer.echo("error: no CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS and no local broker (`ctxbudget kafka up`)", err=True)
        raise typer.Exit(1)
    return settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
