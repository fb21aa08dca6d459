"""The app served by uvicorn on a real socket: every answer carries the security headers (issue 20.5)."""

from __future__ import annotations

import httpx
import pytest

from api.server import running
from tests.unit.api.fakes import RecordingPublisher, make_app


@pytest.mark.parametrize("path", ["/", "/static/js/main.js", "/api/v1/conversations", "/healthz"])
async def test_answers_carry_the_security_headers(tmp_path, path: str) -> None:
    app = make_app(tmp_path, RecordingPublisher())
    async with running(app, "127.0.0.1", 0) as url, httpx.AsyncClient(base_url=url) as client:
        headers = (await client.get(path)).headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "default-src 'self'" in headers["content-security-policy"]
