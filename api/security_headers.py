"""Headers every answer carries: the page's content policy, no MIME sniffing, no framing, no referrer; and JSON answers
`Cache-Control: no-store`.

Sent as headers (the page's <meta> policy cannot forbid framing: `frame-ancestors` only works as a header) on every
answer, JSON and SSE too, so a browser never renders one as a page of another origin's frame.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
NO_STORE = (b"cache-control", b"no-store")
"""On JSON answers: they carry a caller's projects, threads and packages, which no cache (a proxy's, the browser's
disk) may keep for the next user of the machine."""


class SecurityHeaders:
    """Pure ASGI (not BaseHTTPMiddleware), so streamed SSE answers pass through unbuffered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                json = any(k.lower() == b"content-type" and v.startswith(b"application/json") for k, v in headers)
                cached = any(k.lower() == b"cache-control" for k, _ in headers)
                message["headers"] = [*headers, *HEADERS, *([NO_STORE] if json and not cached else [])]
            await send(message)

        await self.app(scope, receive, with_headers)
