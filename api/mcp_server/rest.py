"""The tools' one way to the API: a REST request with the caller's bearer token, its JSON or its error message."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
from mcp.server.mcpserver.exceptions import ToolError

Headers = Mapping[str, str] | None
TokenOf = Callable[[Headers], str | None]
"""The bearer token of the caller behind an MCP request, from its HTTP headers (stdio has none: the configured
token; HTTP: the request's own)."""


class ApiRefused(ToolError):
    """The API answered an error: the tool error carries its status and message, so the master can act on it."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class RestApi:
    client: httpx2.AsyncClient
    """Based on the API's URL (or the app itself through httpx2.ASGITransport)."""
    token_of: TokenOf

    def headers(self, request_headers: Headers) -> dict[str, str]:
        token = self.token_of(request_headers)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def call(
        self,
        request_headers: Headers,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON object the API answered; `ApiRefused` for a 4xx or 5xx."""
        headers = self.headers(request_headers)
        query = {name: value for name, value in (params or {}).items() if value is not None}
        response = await self.client.request(method, path, params=query, json=body, headers=headers)
        if response.status_code >= 400:
            raise ApiRefused(response.status_code, _detail(response))
        return response.json()


def segment(value: str) -> str:
    """An id as one path segment: a `/` or `?` in it cannot reach another route."""
    return quote(value, safe="")


def _detail(response: httpx2.Response) -> str:
    """The API's `detail` (a message, or the validation errors' messages), else the body's text."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text or response.reason_phrase
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(map(str, item.get('loc', [])))}: {item.get('msg', '')}" for item in detail)
    return str(detail) if detail is not None else response.text
