"""`ctxbudget master` over stdio (it starts `ctxbudget mcp`, which calls a real `ctxbudget run`'s API): one round asks
the critical thread for its handoff before the urgent one, and every tool call of the round is answered (the
threads already have the level's `prepare_handoff` open, so the API answers with it: see
tests/integration/test_handoff_requests_api.py for what a request then does in the engine)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from tests.integration.pipeline import Outputs, produce, served_worker
from tests.integration.test_master_writes import now_snapshot

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

PROJECT = "proj-master"


async def test_one_round_requests_the_critical_threads_handoff_first(settings: Settings, tmp_path: Path) -> None:
    data = tmp_path / "worker"
    async with served_worker(settings, data) as (settings, api, _), Outputs(settings) as outputs:
        token = tmp_path / "token"
        secret = token_secret(Settings(data_dir=data), ApiSettings())
        token.write_text(issue_token(secret, Role.USER, "kris", [PROJECT], ttl=timedelta(hours=1)))
        await produce(
            settings,
            [
                ("snapshots", "thread-urgent", now_snapshot(30.0, "thread-urgent", 1)),
                ("snapshots", "thread-critical", now_snapshot(8.0, "thread-critical", 1)),
            ],
        )

        def requiring(o: Outputs) -> list[str]:
            views = [v for v in o.records["project-risk"] if v["project_id"] == PROJECT]
            return views[-1]["threads_requiring_handoff"] if views else []

        await outputs.wait_for(lambda o: len(requiring(o)) == 2, within=90, what="both threads require a handoff")
        await asyncio.sleep(5)  # the project list reads ClickHouse: the sink writes the view within its batch time
        master = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streams", "master", "--api-url", api, "--token-file", str(token),
            "--project", PROJECT, "--rounds", "1", "--interval", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(master.communicate(), timeout=120)
        assert master.returncode == 0, err.decode()[-3000:]
        (line,) = out.decode().splitlines()
        round_ = json.loads(line)
        assert round_["requested"] == ["thread-critical", "thread-urgent"]
        assert round_["errors"] == []
        # the relay schedule answered (issue 37): both fit the default caps, neither was relayed before, and with
        # no safe thread a new subtask goes to a fresh one
        assert (round_["queued"], round_["futile"]) == ([], {})
        assert round_["new_subtasks"][PROJECT].startswith("fresh thread: no free safe thread (1 critical, 1 urgent)")
