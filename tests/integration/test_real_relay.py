"""The relay with the real Claude Code and Codex (issue 35), set up as the README says, against a `ctxbudget run`
worker: a session climbs safe -> watch -> urgent -> critical, the pipeline asks for a handoff, the agent writes its
own part, the package is ready before the tool compacts (automatically, or by `/compact`), the compaction is recorded
with `handoff_ready` and no `handoff_missing`, the session goes on from the package's resume prompt, and nothing of
ctxbudget lands in the work tree or in a package's files.

Modes: Claude Code automatic and manual compaction, Codex `exec` with hooks, Codex app-server with the reporter as
its client. The model is scripted (tests/realtools/model_server.py); everything else is what a user runs.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from tests.integration.pipeline import served_worker
from tests.realtools.relay_scenario import Group, Mode, settled, worker_token
from tests.realtools.tools import tools

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.agent_tools]

SETTLE_SECONDS = 90
"""How long the sinks may take to write what the last compaction caused."""


@pytest.mark.timeout(600)
async def test_every_compaction_carries_the_agents_own_handoff(settings: Settings, tmp_path: Path) -> None:
    binaries = tools()
    data_dir = tmp_path / "pipeline"
    async with served_worker(settings, data_dir) as served:
        secret = token_secret(Settings(data_dir=data_dir), ApiSettings())
        operator = issue_token(secret, Role.OPERATOR, "test", ttl=timedelta(hours=1))
        groups = []
        for mode in Mode:
            project, worker = f"proj-{mode}", f"worker-{mode}"
            token = await asyncio.to_thread(worker_token, data_dir, worker, project)
            groups.append(Group(mode, True, tmp_path / mode, served.api, token, project, worker, binaries))
        with ThreadPoolExecutor(len(groups)) as pool:
            played = await asyncio.gather(
                *(asyncio.wrap_future(pool.submit(group.run, 1)) for group in groups)  # type: ignore[arg-type]
            )
        for group, sessions in zip(groups, played, strict=True):
            (session,) = sessions
            assert session.compactions >= 1, group.mode
            assert session.resumed, f"{group.mode}: no request after the compaction carried the resume prompt"
            assert session.work_tree_status == ["?? notes.txt"], f"{group.mode}: {session.work_tree_status}"
        summary = groups[0].script().handoff["summary"]
        records = await asyncio.to_thread(settled, served.api, operator, groups, summary, SETTLE_SECONDS)
        for group in groups:
            seen = records[group.project]
            expected = sum(s.compactions for s in group.sessions)
            assert len(seen.compactions) >= expected, f"{group.mode}: {len(seen.compactions)} of {expected} recorded"
            assert all(c.handoff_ready for c in seen.compactions), (group.mode, seen.compactions)
            assert all(c.agent_part for c in seen.compactions), (group.mode, seen.compactions, seen.packages)
            assert seen.handoff_missing == 0, group.mode
            assert seen.ctxbudget_paths == [], group.mode
            if group.mode is Mode.CLAUDE_MANUAL:
                assert {c.trigger_mode for c in seen.compactions} == {"manual"}, seen.compactions
