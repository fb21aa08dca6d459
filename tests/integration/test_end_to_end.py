"""From a real agent tool's output to the ring a user sees: reporter -> API -> pipeline -> ClickHouse.

`ctxbudget report` reads a Codex app-server session (the fixture: grows, compacts, grows again), posts its snapshots
to the 5.2 endpoint of a `ctxbudget run` worker with a worker token; the engine classifies them, the indicator fold
updates the conversation's ring, the sink writes it to ClickHouse, and the BFF's conversation list shows it.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
import urllib.error
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from schemas import Conversation, ConversationType
from tests.integration.pipeline import Outputs, get_json, produce, served_worker, until_listed
from tests.unit.reporter.conftest import FIXTURES

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

THREAD, PROJECT, WORKER = "thr_a", "proj-e2e", "worker-e2e"
LAST_BUDGET_PCT = 62.2
"""The fixture's last reading: room before Codex's auto-compaction at 0.9 x the model's window (tests/unit/reporter)."""


async def test_a_codex_session_reported_through_the_api_shows_as_the_conversations_ring(
    settings: Settings, tmp_path: Path
) -> None:
    async with served_worker(settings, tmp_path / "worker") as (settings, api, _), Outputs(settings) as outputs:
        conversation = Conversation(
            conversation_id="conv-e2e",
            conversation_type=ConversationType.SINGLE_DEVICE,
            project_id=PROJECT,
            project_title="End to end",
            thread_ids=[THREAD],
            updated_at=datetime.now(UTC),
        )
        await produce(settings, [("conversations", conversation.conversation_id, conversation)])
        secret = token_secret(Settings(data_dir=tmp_path / "worker"), ApiSettings())  # the worker's own
        token = issue_token(secret, Role.WORKER, WORKER, [PROJECT], ttl=timedelta(hours=1))
        report = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streams", "report", "--from", "codex-app-server",
            "--input", str(FIXTURES / "app_server_session.jsonl"), "--node-id", "node-e2e",
            "--worker-id", WORKER, "--project-id", PROJECT, "--api-url", api, "--token", token,
            "--spool-dir", str(tmp_path / "spool"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(report.communicate(), timeout=120)
        assert report.returncode == 0, output.decode()

        expected = math.floor(LAST_BUDGET_PCT)

        def ring(o: Outputs) -> dict | None:
            items = [r for r in o.records["conversation-indicators"] if r["conversation_id"] == "conv-e2e"]
            return items[-1]["context_budget_indicator"] if items else None

        await outputs.wait_for(lambda o: (ring(o) or {}).get("percent") == expected, within=90, what="the ring")
        assert ring(outputs) == {
            "schema_version": 1, "visible": True, "style": "ring_percent", "percent": expected, "level": "safe",
            "stale": False,
        }  # fmt: skip
        state = outputs.latest_states()[THREAD]
        assert (state["source_kind"], state["worker_id"], state["compaction_count"]) == (
            "codex_app_server",
            WORKER,
            1,
        )
        # The BFF reads the same ring from ClickHouse, once the sink has written it.
        operator = issue_token(secret, Role.OPERATOR, "e2e", ttl=timedelta(hours=1))
        listed = await until_listed(api, operator, "conv-e2e", within=30, percent=expected)
        assert listed["context_budget_indicator"]["percent"] == expected
        # The thread view (spec 6.3) of the same thread: the engine's level, the worker's exact budget.
        detail = await _until_found(f"{api}/api/v1/threads/{THREAD}/context-budget", operator, within=30)
        assert (detail["context_budget_level"], detail["compaction_count"]) == ("safe", 1)
        assert round(detail["context_budget_remaining_pct"], 2) == LAST_BUDGET_PCT


async def _until_found(url: str, token: str, within: float) -> dict:
    """GET until it stops answering 404: each table's sink flushes on its own, so rows land one after another."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await asyncio.to_thread(get_json, url, token)
        except urllib.error.HTTPError as error:
            if error.code != 404 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
