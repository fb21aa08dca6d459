"""The relay acts (issue 23), on the real pipeline: reporter -> API -> engine -> actions -> reporter -> package.

`ctxbudget report --app-server` is the client of the scripted Codex stand-in (tests/standins/codex_app_server.py),
whose thread grows turn by turn until it compacts at its window point. The engine classifies the thread watch ->
urgent -> critical and issues its wrap-up actions in the 5.2 answers; the reporter acknowledges them, asks the agent
over app-server (turn/start with the output schema, or turn/steer), posts the package draft then ready, and
completes the actions. The package is ready before the stand-in compacts: `handoff_missing` never opens, and the
compaction records a ready package for its cycle.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from tests.integration.pipeline import Outputs, served_worker
from tests.standins.codex_app_server import HANDOFF

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

THREAD, PROJECT, WORKER = "thr_relay_standin", "proj-relay", "worker-relay"
STANDIN = Path(__file__).parents[1] / "standins" / "codex_app_server.py"


def work_tree(root: Path) -> Path:
    """The thread's working directory: a git repository with uncommitted work the package must carry."""
    repo = root / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "parser.py").write_text("def parse(): ...\n")
    return repo


async def test_the_worker_is_asked_and_its_package_is_ready_before_the_thread_compacts(
    settings: Settings, tmp_path: Path
) -> None:
    log = tmp_path / "standin.jsonl"
    resume = tmp_path / "resume.txt"
    resume.write_text("You are continuing thread thr_before: apply the patch first.")
    repo = work_tree(tmp_path)
    # no grace: a thread critical without a ready package would open handoff_missing at once
    served = served_worker(settings, tmp_path / "worker", CTXBUDGET_HANDOFF_MISSING_GRACE_SECONDS="0")
    async with served as (settings, api, _), Outputs(settings) as outputs:
        secret = token_secret(Settings(data_dir=tmp_path / "worker"), ApiSettings())
        token = issue_token(secret, Role.WORKER, WORKER, [PROJECT], ttl=timedelta(hours=1))
        standin = [sys.executable, str(STANDIN), "--thread-id", THREAD, "--log", str(log)]
        standin += ["--turns", "12", "--turn-seconds", "1.5", "--gap-seconds", "0.5"]
        report = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streams", "report", "--from", "codex-app-server",
            "--app-server", shlex.join(standin), "--first-input", str(resume), "--cwd", str(repo),
            "--node-id", "node-relay", "--worker-id", WORKER, "--project-id", PROJECT,
            "--api-url", api, "--token", token, "--spool-dir", str(tmp_path / "spool"), "--ask-seconds", "20",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(report.communicate(), timeout=180)
        said = output.decode()
        assert report.returncode == 0, said

        def compactions(o: Outputs) -> list[dict]:
            return o.of_thread("compactions", THREAD)

        await outputs.wait_for(lambda o: compactions(o), within=60, what="the compaction record")
        levels = [s["context_budget_level"] for s in outputs.of_thread("thread-state", THREAD)]
        seen = list(dict.fromkeys(levels))
        assert seen[: seen.index("critical") + 1][-3:] == ["watch", "urgent", "critical"], levels

        # the stand-in was asked in the requested shape, and compacted after it answered
        events = [json.loads(line) for line in log.read_text().splitlines()]
        answered = [e for e in events if e["what"] == "answered"]
        compacted = [e for e in events if e["what"] == "compacted"]
        assert answered, said
        assert len(compacted) == 1
        assert answered[0]["at"] < compacted[0]["at"]
        first = next(e for e in events if e.get("method") == "turn/start")
        assert first["params"]["input"][0]["text"] == resume.read_text()

        # the package: ready before the compaction, with the agent's part and the worker's facts
        packages = [s["handoff"] for s in outputs.of_thread("thread-state", THREAD) if s.get("handoff")]
        ready = next(p for p in packages if p["package_status"] == "ready")
        assert datetime.fromisoformat(ready["ready_at"]).timestamp() < compacted[0]["at"]
        assert ready["summary_text"].startswith(HANDOFF["summary"])
        assert ready["open_questions"] == HANDOFF["open_questions"]
        assert ready["critical_files"] == ["parser.py"]
        patch = Path(next(a for a in ready["critical_artifacts"] if a.endswith(".diff")))
        assert "def parse()" in await asyncio.to_thread(patch.read_text)

        # the compaction records the ready package of its cycle; handoff_missing never opened
        assert [c["handoff_ready"] for c in compactions(outputs)] == [True]
        alerts = {a["alert_type"] for a in outputs.of_thread("alerts", THREAD)}
        assert "handoff_missing" not in alerts, alerts

        # the worker acknowledged the actions it was given, and the wrap-up ended done
        actions = outputs.of_thread("master-actions", THREAD)
        assert any(a["state"] == "acknowledged" and a["changed_by"] == WORKER for a in actions), actions
        wrap_ups = [a for a in actions if a["actions"][0] == "prepare_handoff"]
        assert "done" in {a["state"] for a in wrap_ups}
        assert "relay: " in said
