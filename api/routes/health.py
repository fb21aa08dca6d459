"""`/healthz`, `/readyz`, `/metrics` of the API: public, outside the versioned API, like the worker's.

Ready = the Kafka side started (the app's lifespan set its context), the broker answers its probe (core/health.py)
and ClickHouse answers its.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from core.health import ClickHouseProbe, KafkaProbe, Readiness, metrics_text

router = APIRouter(tags=["operations"], include_in_schema=False)


@router.get("/healthz")
async def healthz() -> dict[str, bool]:
    return {"alive": True}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    started = getattr(state, "context", None) is not None
    probe: ClickHouseProbe = state.clickhouse_probe
    kafka: KafkaProbe = state.kafka_probe
    readiness = Readiness(
        {"kafka_services": started, "kafka": await kafka.reachable(), "clickhouse": await probe.reachable()}
    )
    return JSONResponse(readiness.body(), status_code=readiness.status)


@router.get("/metrics")
async def metrics() -> Response:
    body, content_type = metrics_text()
    return Response(body, media_type=content_type)
