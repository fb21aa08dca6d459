from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.samples import SPEC_REPORT_RESPONSE

FIXTURES = Path(__file__).parent / "fixtures"
ROLLOUT_THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
ROLLOUT_FILE = FIXTURES / f"rollout-2026-03-25T15-00-00-{ROLLOUT_THREAD}.jsonl"

Answer = tuple[int, dict[str, str], bytes]
OK: Answer = (200, {"Content-Type": "application/json"}, json.dumps(SPEC_REPORT_RESPONSE).encode())
UNAVAILABLE: Answer = (503, {"Retry-After": "2"}, b"busy")


@pytest.fixture
def app_server_lines() -> list[str]:
    return (FIXTURES / "app_server_session.jsonl").read_text().splitlines()


class LocalApi:
    """A local API that answers each POST with the next scripted (status, headers, body), or `UNAVAILABLE` while
    `down`, and records every request with the status it got."""

    def __init__(self, script: list[Answer]) -> None:
        self.script = script
        self.down = False
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.statuses: list[int] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                api.requests.append((self.path, dict(self.headers), body))
                step = min(len(api.requests), len(api.script)) - 1
                status, headers, answer = UNAVAILABLE if api.down else api.script[step]
                api.statuses.append(status)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def serve() -> Iterator[Callable[[list[Answer]], LocalApi]]:
    servers: list[LocalApi] = []

    def start(script: list[Answer]) -> LocalApi:
        server = LocalApi(script)
        threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()
