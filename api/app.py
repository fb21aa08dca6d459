"""The FastAPI app: routes, the caller's collaborators, errors, and an OpenAPI document generated from the models."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client
from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from api.deps import ApiContext
from api.mcp_server.mount import mount_mcp
from api.openapi import add_body_schemas
from api.publisher import RETRY_AFTER_SECONDS, KafkaUnavailable
from api.routes import (
    alert_list,
    alerts,
    analytics,
    compaction_points,
    conversations,
    events,
    fleet_writes,
    handoff_packages,
    handoff_requests,
    health,
    master_actions,
    project_list,
    projects,
    session_events,
    sql,
    task_importance,
    threads,
    workers,
)
from api.security_headers import SecurityHeaders
from api.services import KafkaServices, kafka_services
from api.settings import ApiSettings, token_secret
from core.health import ClickHouseProbe, KafkaProbe
from core.settings import Settings

ServicesFactory = Callable[[], AbstractAsyncContextManager[KafkaServices]]

STATIC_DIR = Path(__file__).parent / "static"
"""The conversation-list web page: plain HTML, CSS and JavaScript modules, served as they are (no build step)."""


def create_app(
    settings: Settings,
    clickhouse: Client,
    api: ApiSettings | None = None,
    *,
    services: ServicesFactory | None = None,
    secret: bytes | None = None,
    probe: ClickHouseProbe | None = None,
) -> FastAPI:
    """The app over `clickhouse` (the caller owns the client: chdb allows one per data path and process).

    `services` starts the Kafka side with the app (default: the real producer and readers from `settings`);
    `probe` answers whether ClickHouse is reachable for `/readyz` (default: a ping through `clickhouse`); Kafka's
    probe also runs every second while the app does, for the log's outage lines.
    """
    api = api or ApiSettings()
    secret = secret or token_secret(settings, api)
    start_services = services or (lambda: kafka_services(settings, api))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        watch = asyncio.create_task(app.state.kafka_probe.watch(), name="kafka-probe")
        try:
            async with start_services() as kafka:
                app.state.context = ApiContext(settings, api, secret, clickhouse, kafka)
                async with mcp_sessions():
                    yield
        finally:
            watch.cancel()

    app = FastAPI(
        title="ctxbudget API",
        version="1",
        summary="Thread context budgets: worker reports (spec 5.2), the conversation-list BFF (6.1-6.3), SSE (6.4).",
        lifespan=lifespan,
        # No OpenTelemetry here (metrics are Prometheus, /metrics): FastAPI's own instrumentation looked the global
        # providers up on every request, 5% of a report's time.
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.clickhouse_probe = probe or ClickHouseProbe.of(clickhouse)
    app.state.kafka_probe = KafkaProbe(settings.kafka_bootstrap_servers or "")
    for module in (
        workers,
        session_events,
        conversations,
        project_list,
        projects,
        threads,
        alerts,
        alert_list,
        master_actions,
        handoff_packages,
        fleet_writes,
        handoff_requests,
        task_importance,
        events,
        sql,
        analytics,
        compaction_points,
        health,
    ):
        app.include_router(module.router)
    mcp_sessions = mount_mcp(app)
    app.add_exception_handler(KafkaUnavailable, _kafka_unavailable)
    app.add_middleware(SecurityHeaders)
    add_body_schemas(app)
    _serve_page(app)
    return app


def _serve_page(app: FastAPI) -> None:
    """The web page at `/` and its files under `/static`; public (the page asks for a token, the API checks it)."""
    index = STATIC_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(index, headers={"Cache-Control": "no-cache"})

    app.mount("/static", _RevalidatedFiles(directory=STATIC_DIR), name="static")


class _RevalidatedFiles(StaticFiles):
    """Browsers ask again (ETag) before reusing a file, so an upgraded API never runs with yesterday's scripts."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def _kafka_unavailable(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": "Kafka did not acknowledge the record; send it again"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
