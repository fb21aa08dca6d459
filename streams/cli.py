"""`ctxbudget`: the one command line of the project."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from reporter.cli import report
from streams.settings import Settings

app = typer.Typer(help="Context-budget stream pipeline.", no_args_is_help=True, add_completion=False)
kafka_app = typer.Typer(help="The local Apache Kafka broker (KRaft, 127.0.0.1), for development and tests.")
app.add_typer(kafka_app, name="kafka")
app.command("report")(report)


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
def run() -> None:
    """Run the pipeline on embedded defaults: local Kafka (unless configured), topics, ClickHouse migrations, worker.

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
        _run_worker(settings)
    finally:
        if started is not None:
            started.down()


def _run_worker(settings: Settings) -> None:
    import faust

    from sinks.clickhouse import connect
    from sinks.migrations import apply_history_ttl
    from sinks.migrations import migrate as apply
    from streams.topics import ensure_topics_sync
    from streams.topology import build

    created = ensure_topics_sync(settings)
    # The worker owns the one client for its whole life (chdb: one process per data path); the sinks write through it.
    client = connect(settings.clickhouse_url)
    try:
        applied = apply(client)
        apply_history_ttl(client, settings.clickhouse_history_ttl_days)
        typer.echo(f"kafka: {settings.kafka_bootstrap_servers} (created {len(created)} topics)")
        typer.echo(f"clickhouse: {settings.clickhouse_url} ({len(applied)} migrations applied)")
        worker = faust.Worker(build(settings, clickhouse=client), loglevel=settings.log_level, quiet=True)
        try:
            worker.execute_from_commandline()
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
    finally:
        client.close()


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
    """Produce realistic fleet traffic (budgets shrinking by turns, compactions, handoffs, bad records) to Kafka."""
    import asyncio
    from datetime import UTC, datetime

    from streams.simulator import SimulationConfig, generate, produce
    from streams.topics import ensure_topics

    settings = Settings()
    if not settings.kafka_bootstrap_servers:
        bootstrap = _local_kafka(settings).status().bootstrap
        if bootstrap is None:
            typer.echo(
                "error: no CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS and no local broker (`ctxbudget kafka up`)", err=True
            )
            raise typer.Exit(1)
        settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
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
    sent = asyncio.run(produce(generate(config), settings.kafka_bootstrap_servers, settings.topic_prefix, rate))
    typer.echo(f"sent {sent} records to {settings.kafka_bootstrap_servers}")


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Listen address (default CTXBUDGET_API_HOST or 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default CTXBUDGET_API_PORT or 8080).")] = None,
    print_operator_token: Annotated[bool, typer.Option(help="Print a locally signed operator token first.")] = False,
) -> None:
    """Serve the HTTP API (spec 5.2, 6) over Kafka and ClickHouse until interrupted.

    With embedded chdb only one process may open the database: use it when the pipeline runs elsewhere.
    """
    from api.cli import run_api
    from api.settings import ApiSettings

    settings = Settings()
    if not settings.kafka_bootstrap_servers:
        bootstrap = _local_kafka(settings).status().bootstrap
        if bootstrap is None:
            typer.echo(
                "error: no CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS and no local broker (`ctxbudget kafka up`)", err=True
            )
            raise typer.Exit(1)
        settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
    overrides = {name: value for name, value in (("host", host), ("port", port)) if value is not None}
    run_api(settings, ApiSettings(**overrides), print_operator_token)


def main() -> None:
    sys.exit(app())
