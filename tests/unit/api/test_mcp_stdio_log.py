"""`ctxbudget mcp` keeps its stderr for what matters: no log line per HTTP call it makes to the API (the agent tool
shows a server's stderr to its user)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client


class _NoProjects(BaseHTTPRequestHandler):
    """An API that sees no project: enough for `list_projects` to make its call and answer."""

    def do_GET(self) -> None:
        body = b'{"items": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoProjects)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_tool_call_writes_no_http_log_line_to_stderr(api_url: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("a-token\n")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "streams", "mcp", "--api-url", api_url, "--token-file", str(token_file)],
        env={"CTXBUDGET_DATA_DIR": str(tmp_path)},
    )
    with (tmp_path / "stderr").open("w") as stderr:
        async with Client(stdio_client(server, errlog=stderr)) as client:
            answer = await client.call_tool("list_projects", {})
    assert not answer.is_error, answer.content
    assert answer.structured_content == {"items": []}
    logged = (tmp_path / "stderr").read_text()
    assert "HTTP Request" not in logged, logged
