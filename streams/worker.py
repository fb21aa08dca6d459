"""A worker's Faust app: the runtime (`streams.runtime`) around it, running the topology's declaration
(`streams.topology.wire`). It sits above both, so the runtime never imports the topology it runs."""

from __future__ import annotations

import faust
from clickhouse_connect.driver.client import Client

from core.health import ClickHouseProbe
from core.settings import Settings
from streams.runtime import observability
from streams.runtime.agents import Runtime
from streams.runtime.app import create_app
from streams.topology import wire


def build(settings: Settings, clickhouse: Client | None = None) -> faust.App:
    """The worker's app with the agents of `settings.roles`; with a `clickhouse` client (owned by the worker) the
    sinks write every route into it."""
    app = create_app(settings)
    runtime = Runtime(app, settings)
    probe = ClickHouseProbe.of(clickhouse) if clickhouse is not None else None
    observability.install(app, settings, probe, runtime.failures)
    wire(runtime, settings, clickhouse)
    return app
