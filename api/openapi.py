"""The OpenAPI document: FastAPI's, plus the schemas of the bodies the routes validate themselves (api.bodies)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, TypeAdapter

from api.views import ConsumeRequest, HandoffRequest, TaskImportanceRequest
from schemas import SESSION_EVENT_ADAPTER, Conversation, HandoffPackage, ThresholdPolicy, WorkerReportRequest

BODY_MODELS: tuple[type[BaseModel], ...] = (
    WorkerReportRequest,
    HandoffPackage,
    Conversation,
    ThresholdPolicy,
    ConsumeRequest,
    HandoffRequest,
    TaskImportanceRequest,
)
BODY_UNIONS: dict[str, TypeAdapter[Any]] = {"SessionEvent": SESSION_EVENT_ADAPTER}
REF_TEMPLATE = "#/components/schemas/{model}"


def add_body_schemas(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            for model in BODY_MODELS:
                schema = model.model_json_schema(ref_template=REF_TEMPLATE)
                schemas.update(schema.pop("$defs", {}))
                schemas[model.__name__] = schema
            for name, adapter in BODY_UNIONS.items():
                schema = adapter.json_schema(ref_template=REF_TEMPLATE)
                schemas.update(schema.pop("$defs", {}))
                schemas[name] = schema
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
