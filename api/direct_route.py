"""A route served without FastAPI's per-request dependency solving, for the hot write path (spec 5.2 reports).

FastAPI solves a route's dependency tree afresh on every request with machinery for every feature it has (overrides,
caches, security scopes, `yield` dependencies, thread pools, parameter models); on the report route that solving cost
more than the route's own work. A `DirectRoute` is declared, documented in OpenAPI and guarded like any other route,
from its signature; only serving differs: the tree is walked once, when the route is built, into a plan that calls
the same dependencies in the same order and validates path and header parameters with their FastAPI fields (the same
401, 403 and 422 answers). A tree needing what the plan does not do is refused when the route is built; dependency
overrides (`app.dependency_overrides`) do not apply to it.
"""

from __future__ import annotations

import copy
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi._compat import ModelField
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

Solved = tuple[dict[str, Any], list[Any]]
Plan = Callable[[Request], Awaitable[Solved]]
SCALARS = (str, int, float, bool)


class DirectRoute(APIRoute):
    """An APIRoute whose endpoint returns its own `Response`, with dependencies a plan solves."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        calls = list(_calls(self.dependant))
        if len(calls) != len(set(calls)):  # FastAPI would call a repeated dependency once per request
            raise TypeError(f"{self.path}: a DirectRoute cannot solve a dependency used twice")
        solve = plan(self.dependant)
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            values, errors = await solve(request)
            if errors:
                raise RequestValidationError(errors)
            return await endpoint(**values)

        return handler


@dataclass(frozen=True)
class _Param:
    field: ModelField
    key: str
    loc: tuple[str, str]
    headers: bool


def plan(dependant: Dependant) -> Plan:
    """The values `dependant.call` is called with, and the 422 errors, solved in FastAPI's order: the dependencies in
    declaration order, each called unless its own parameters failed; then path and header parameters."""
    refused = unsupported(dependant)
    if refused:
        raise TypeError(f"{dependant.call!r}: a DirectRoute cannot solve {', '.join(refused)}")
    dependencies = [(sub.name, sub.call, plan(sub)) for sub in dependant.dependencies]
    params = [_Param(f, f.alias, ("path", f.alias), False) for f in dependant.path_params]
    params += [_Param(f, f.alias, ("header", f.alias), True) for f in dependant.header_params]
    request_names = [n for n in (dependant.request_param_name, dependant.http_connection_param_name) if n is not None]

    async def solve(request: Request) -> Solved:
        values: dict[str, Any] = {}
        errors: list[Any] = []
        for name, call, solve_dependency in dependencies:
            arguments, failed = await solve_dependency(request)
            if failed:
                errors += failed
                continue
            solved = await call(**arguments)  # type: ignore[misc]
            if name is not None:
                values[name] = solved
        for param in params:
            source: Mapping[str, Any] = request.headers if param.headers else request.path_params
            value = source.get(param.key)
            if value is None:  # an optional header (a path parameter is there once the route matched)
                values[param.field.name] = copy.deepcopy(param.field.default)
                continue
            valid, failed = param.field.validate(value, values, loc=param.loc)
            if failed:
                errors += failed
            else:
                values[param.field.name] = valid
        for name in request_names:
            values[name] = request
        return values, errors

    return solve


def unsupported(dependant: Dependant) -> list[str]:
    """What of `dependant` (itself, not its dependencies) a plan does not solve."""
    call = dependant.call
    coroutine = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)
    params = dependant.path_params + dependant.header_params
    checks = {
        "query parameters": bool(dependant.query_params),
        "cookies": bool(dependant.cookie_params),
        "a body parameter": bool(dependant.body_params),
        "a plain `def` or `yield` dependency": not coroutine,
        "a concurrency limit": dependant.concurrency is not None,
        "WebSocket, Response, BackgroundTasks or SecurityScopes parameters": any(
            (
                dependant.websocket_param_name,
                dependant.response_param_name,
                dependant.background_tasks_param_name,
                dependant.security_scopes_param_name,
            )
        ),
        "a required header": any(f.field_info.is_required() for f in dependant.header_params),
        "a parameter other than one string, number or boolean under one name": not all(_plain(f) for f in params),
    }
    return [what for what, found in checks.items() if found]


def _plain(field: ModelField) -> bool:
    info = field.field_info
    annotation = info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    default_checked = info.validate_default and not info.is_required()
    return annotation in SCALARS and info.validation_alias in (None, field.alias) and not default_checked


def _calls(dependant: Dependant) -> typing.Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)
