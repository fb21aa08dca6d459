"""A DirectRoute answers exactly as FastAPI's own route does for the same endpoint, and refuses what it cannot solve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.deps import Context, Reporter
from api.direct_route import DirectRoute
from api.routes.workers import report_thread_context, router
from api.tokens import Role
from tests.samples import SPEC_REPORT_REQUEST, dumps
from tests.unit.api.fakes import RecordingPublisher, bearer, make_app

PATH = "/api/v1/workers/{worker_id}/thread-context"
PLAIN = "/plain" + PATH
WORKER = bearer(Role.WORKER, "worker-mac-01", "proj-001")
BODY = dumps(SPEC_REPORT_REQUEST)
CASES = {
    "accepted": ("worker-mac-01", WORKER, BODY),
    "with identity headers": (
        "worker-mac-01",
        {**WORKER, "Idempotency-Key": "snap-1", "X-Snapshot-Version": "7"},
        BODY,
    ),
    "no token": ("worker-mac-01", {}, BODY),
    "not a bearer token": ("worker-mac-01", {"Authorization": "Basic eDp5"}, BODY),
    "forged token": ("worker-mac-01", {"Authorization": "Bearer x.y.z"}, BODY),
    "a user's token": ("worker-mac-01", bearer(Role.USER, "kris", "proj-001"), BODY),
    "another worker": ("worker-mac-02", WORKER, BODY),
    "an invalid worker id": ("worker%20mac", WORKER, BODY),
    "an invalid worker id without a token": ("worker%20mac", {}, BODY),
    "a bad version header": ("worker-mac-01", {**WORKER, "X-Snapshot-Version": "-3"}, BODY),
    "an invalid body": ("worker-mac-01", WORKER, b'{"worker_id": 3}'),
}


def answer(tmp_path: Path, path: str, case: str) -> tuple[int, object, str | None, list[bytes]]:
    """A fresh app (its thread book is empty), the report route also served at /plain by FastAPI's own route."""
    publisher = RecordingPublisher()
    app = make_app(tmp_path, publisher)
    [route] = router.routes
    assert isinstance(route, APIRoute)
    app.router.add_api_route(
        PLAIN, report_thread_context, methods=["POST"], openapi_extra=route.openapi_extra, route_class_override=APIRoute
    )
    worker_id, headers, body = CASES[case]
    with TestClient(app) as client:
        response = client.post(path.format(worker_id=worker_id), content=body, headers=headers)
    return (
        response.status_code,
        response.json(),
        response.headers.get("www-authenticate"),
        [v for *_, v in publisher.sent],
    )


@pytest.mark.parametrize("case", CASES)
def test_the_report_route_answers_as_fastapis_own_route(tmp_path, case: str) -> None:
    assert answer(tmp_path / "direct", PATH, case) == answer(tmp_path / "plain", PLAIN, case)


def test_the_report_route_is_served_directly() -> None:
    assert [type(route) for route in router.routes] == [DirectRoute]


async def query(limit: Annotated[int, Query()] = 1) -> None: ...


def sync(request: Request) -> None: ...


async def sync_dependency(dependency: Annotated[None, Depends(sync)]) -> None: ...


async def needs_context_twice(first: Context, second: Context) -> None: ...


async def required_header(trace: Annotated[str, Header()]) -> None: ...


async def list_header(tags: Annotated[list[str] | None, Header()] = None) -> None: ...


async def fine(caller: Reporter, context: Context, trace: Annotated[str | None, Header()] = None) -> None: ...


@pytest.mark.parametrize(
    ("endpoint", "refusal"),
    [
        (query, "query parameters"),
        (sync_dependency, "a plain `def` or `yield` dependency"),
        (needs_context_twice, "a dependency used twice"),
        (required_header, "a required header"),
        (list_header, "a parameter other than one string"),
    ],
)
def test_a_tree_it_cannot_solve_is_refused_when_the_route_is_built(endpoint, refusal: str) -> None:
    with pytest.raises(TypeError, match=refusal):
        APIRouter(route_class=DirectRoute).add_api_route("/x", endpoint)


def test_a_tree_of_async_dependencies_path_and_optional_headers_is_built() -> None:
    APIRouter(route_class=DirectRoute).add_api_route("/x", fine)
