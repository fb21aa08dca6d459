"""`/mcp` in the API app: the MCP server over streamable HTTP, behind the API's own bearer check.

A request without a valid token is answered 401 exactly as the API answers it (api.deps.caller), before MCP reads
it; its body is read here like every API body (api.bodies: 413, 408, an aborted one is one log line), and the
session it opens belongs to its principal: another token on that session id is answered 404, as an unknown one.
The tools then call the app itself through an in-process ASGI transport (`asgi_stream`) with the token of the MCP
request they serve, so the API's roles and project isolation decide every answer. DNS-rebinding protection (a
Host allowlist for unauthenticated localhost servers) is off: every request carries a bearer token a rebinding page
cannot have, and the API is served behind whatever host name its deployment gives it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import httpx2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.bodies import read_body
from api.deps import caller
from api.mcp_server.asgi_stream import StreamingASGITransport
from api.mcp_server.rest import Headers, RestApi
from api.mcp_server.tools import build_server
from api.tokens import ISSUER, Principal

MCP_PATH = "/mcp"
MAX_MCP_BODY_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
"""The SDK's own limit; the gate reads the body (with the API's body timeout) so an aborted one is one log line."""
SELF_URL = "http://ctxbudget.internal"
"""The base URL of the in-process transport (never resolved: requests go straight to the app)."""

_bearer = HTTPBearer(auto_error=False)


def mount_mcp(app: FastAPI) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Serve MCP at `/mcp` of `app`; the context returned runs its sessions: enter it in the app's lifespan.

    Each lifespan gets a server of its own (an MCP session manager runs once); a lifespan entered inside a running
    one (a harness starting the same app twice) shares the running server."""
    gate = _BearerGate(app)
    app.router.add_route(MCP_PATH, gate, include_in_schema=False)

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        if gate.inner is not None:
            yield
            return
        async with httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url=SELF_URL) as http:
            server = build_server(RestApi(http, request_token))
            transport = server.streamable_http_app(
                streamable_http_path=MCP_PATH,
                session_idle_timeout=app.state.context.api.mcp_session_idle_seconds,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            async with server.session_manager.run():
                gate.inner = transport
                try:
                    yield
                finally:
                    gate.inner = None

    return running


def request_token(headers: Headers) -> str | None:
    """The bearer token of the HTTP request carrying this MCP message (the gate let only valid ones in)."""
    scheme, _, token = (headers or {}).get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


class _BearerGate:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.inner: ASGIApp | None = None
        """The running lifespan's MCP transport."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.inner is None:
            await JSONResponse({"detail": "the MCP server is not running"}, 503)(scope, receive, send)
            return
        if scope["type"] == "http":
            request = Request(scope, receive)
            try:
                credentials = await _bearer(request)
                principal = await caller(self.app.state.context, credentials)
                body = await read_body(request, MAX_MCP_BODY_BYTES, self.app.state.context.api.body_timeout_seconds)
            except HTTPException as refused:
                answer = JSONResponse({"detail": refused.detail}, refused.status_code, headers=refused.headers)
                await answer(scope, receive, send)
                return
            assert credentials is not None  # `caller` let a verified token only
            scope = {**scope, "user": AuthenticatedUser(owner(principal, credentials.credentials))}
            receive = _replay(body, receive)
        await self.inner(scope, receive, send)


def owner(principal: Principal, token: str) -> AccessToken:
    """The caller as the MCP session manager knows a session's owner: a session opened with one principal answers
    404 to any other (another user, role or project set), as for an unknown session id."""
    identity = f"{principal.role.value}:{principal.subject}:{','.join(sorted(principal.projects))}"
    return AccessToken(token=token, client_id=identity, scopes=[], subject=principal.subject, claims={"iss": ISSUER})


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read by the gate, then the connection's own messages (a disconnect ends a stream)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed
