"""The FastAPI app: routes, the caller's collaborators, errors, and an OpenAPI document generated from the models."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from clickhouse_connect.driver.client import Client
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from api.deps import ApiContext
from api.openapi import add_body_schemas
from api.publisher import RETRY_AFTER_SECONDS, KafkaUnavailable
from api.routes import alerts, conversations, events, projects, threads, workers
from api.services import KafkaServices, kafka_services
from api.settings import ApiSettings, token_secret
from streams.settings import Settings

ServicesFactory = Callable[[], AbstractAsyncContextManager[KafkaServices]]


def create_app(
    settings: Settings,
    clickhouse: Client,
    api: ApiSettings | None = None,
    *,
    services: ServicesFactory | None = None,
    secret: bytes | None = None,
) -> FastAPI:
    """The app over `clickhouse` (the caller owns the client: chdb allows one per data path and process).

    `services` starts the Kafka side with the app (default: the real producer and readers from `settings`).
    """
    api = api or ApiSettings()
    secret = secret or token_secret(settings, api)
    start_services = services or (lambda: kafka_services(settings, api))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with start_services() as kafka:
            app.state.context = ApiContext(settings, api, secret, clickhouse, kafka)
            yield

    app = FastAPI(
        title="ctxbudget API",
        version="1",
        summary="Thread context budgets: worker reports (spec 5.2), the conversation-list BFF (6.1-6.3), SSE (6.4).",
        lifespan=lifespan,
    )
    for module in (workers, conversations, projects, threads, alerts, events):
        app.include_router(module.router)
    app.add_exception_handler(KafkaUnavailable, _kafka_unavailable)
    add_body_schemas(app)
    return app


async def _kafka_unavailable(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": "Kafka did not acknowledge the record; send it again"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
