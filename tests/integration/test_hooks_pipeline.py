"""The hooks against the real pipeline: a Claude Code thread reported through the API grows critical, the engine
issues `prepare_handoff`, and `ctxbudget hook` (the command Claude Code runs) answers from what the API says.

- owed action -> Stop blocks with the instruction (once) -> a ready package posted -> PreCompact lets the automatic
  compaction through -> after it, SessionStart resumes from the package -> `handoff resume` gives it to a new thread;
- no ready package -> PreCompact holds the automatic compaction once, then lets it through.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from schemas import HandoffPackage, PackageStatus
from schemas.codec import encode_record
from tests.integration.pipeline import get_json, served_worker

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

PROJECT, WORKER = "proj-hooks", "worker-hooks"


def _status(session: str) -> str:
    """Claude Code's status-line input for a session with 150k of its 177k tokens before compaction used."""
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 5_000, "cache_read_input_tokens": 145_000}
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": f"/home/u/.claude/projects/-repo/{session}.jsonl",
            "cwd": "/repo",
            "model": {"id": "claude-opus-4-5-20251101", "display_name": "Opus 4.5"},
            "workspace": {"current_dir": "/repo", "project_dir": "/repo"},
            "version": "2.1.140",
            "context_window": {
                "context_window_size": 200_000,
                "used_percentage": 75.0,
                "remaining_percentage": 25.0,
                "current_usage": usage,
            },
        }
    )


def _hook(session: str, **fields: str) -> str:
    return json.dumps({"session_id": session, "transcript_path": f"/t/{session}.jsonl", "cwd": "/repo"} | fields)


async def _run(env: dict[str, str], *args: str, stdin: str = "") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streams", *args, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def _until(url: str, token: str, done: Any, within: float, what: str) -> dict:
    """GET the thread's detail until `done(detail)`: the API reads ClickHouse, which the sinks fill a moment later."""
    deadline = time.monotonic() + within
    detail: dict = {}
    while True:
        try:
            detail = await asyncio.to_thread(get_json, url, token)
            if done(detail):
                return detail
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {within} s: {detail}")
        await asyncio.sleep(0.5)


async def test_hooks_make_a_thread_hand_off_before_its_automatic_compaction(settings: Settings, tmp_path: Path) -> None:
    owing, stuck = f"sess-{uuid.uuid4().hex[:8]}", f"sess-{uuid.uuid4().hex[:8]}"
    async with served_worker(settings, tmp_path / "worker") as (settings, api, worker):
        secret = token_secret(Settings(data_dir=tmp_path / "worker"), ApiSettings())
        token = issue_token(secret, Role.WORKER, WORKER, [PROJECT], ttl=timedelta(hours=1))
        env = {
            k: v
            for k, v in worker.env.items()
            if k not in ("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", "CTXBUDGET_API_PORT")  # a worker without Kafka
        } | {
            "CTXBUDGET_API_URL": api,
            "CTXBUDGET_WORKER_TOKEN": token,
            "CTXBUDGET_PROJECT_ID": PROJECT,
            "CTXBUDGET_WORKER_ID": WORKER,
            "CTXBUDGET_DATA_DIR": str(tmp_path / "reporter"),
        }
        for session in (owing, stuck):
            code, out, err = await _run(env, "statusline", stdin=_status(session))
            assert code == 0, err
            assert "before compaction" in out
        for session in (owing, stuck):
            await _until(
                f"{api}/api/v1/threads/{session}/context-budget",
                token,
                lambda d: "prepare_handoff" in d["pending_master_actions"],
                within=90,
                what=f"prepare_handoff for {session}",
            )

        # owed and no package: Stop blocks with the instruction the agent reads, once
        code, out, err = await _run(env, "hook", stdin=_hook(owing, hook_event_name="Stop", stop_hook_active="false"))
        assert code == 0, err
        blocked = json.loads(out)
        assert blocked["decision"] == "block"
        assert f"ctxbudget handoff write --thread {owing}" in blocked["reason"]
        again = await _run(env, "hook", stdin=_hook(owing, hook_event_name="Stop", stop_hook_active="true"))
        assert again[:2] == (0, "")

        # the agent wrote its handoff: a ready package reaches the engine through the API (what `handoff write` does)
        now = datetime.now(UTC)
        package = HandoffPackage(
            handoff_package_id=f"hp-{owing}",
            project_id=PROJECT,
            from_thread_id=owing,
            package_status=PackageStatus.READY,
            summary_text="Migration half done: tables created, backfill pending.",
            open_questions=["Backfill in one go or per month?"],
            critical_artifacts=[f"var/handoff/{owing}/uncommitted.patch"],
            created_at=now,
            ready_at=now,
        )
        posted = await asyncio.to_thread(_post, f"{api}/api/v1/threads/{owing}/handoff-packages", token, package)
        assert posted["package_status"] == "ready"
        await _until(
            f"{api}/api/v1/threads/{owing}/context-budget",
            token,
            lambda d: d["handoff_package_status"] == "ready" and "prepare_handoff" not in d["pending_master_actions"],
            within=90,
            what="the ready package",
        )
        through = await _run(env, "hook", stdin=_hook(owing, hook_event_name="PreCompact", trigger="auto"))
        assert through[:2] == (0, "")  # a ready package: the compaction goes through

        # after the compaction the same session resumes from the package
        code, out, err = await _run(env, "hook", stdin=_hook(owing, hook_event_name="SessionStart", source="compact"))
        assert code == 0, err
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "Migration half done" in context
        assert f"var/handoff/{owing}/uncommitted.patch" in context
        relay = f"relay-{owing}"
        code, out, err = await _run(env, "handoff", "resume", "--from-thread", owing, "--to-thread", relay)
        assert code == 0, err
        assert "Backfill in one go or per month?" in out

        # no package yet: told mid-turn after a tool call, once; an automatic compaction is never held
        used = _hook(stuck, hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="t-1", tool_input={})
        code, out, err = await _run(env, "hook", stdin=used)
        assert code == 0, err
        told = json.loads(out)["hookSpecificOutput"]
        assert told["hookEventName"] == "PostToolUse"
        assert f"handoff write --thread {stuck}" in told["additionalContext"]
        assert (await _run(env, "hook", stdin=used))[:2] == (0, "")
        for trigger in ("auto", "manual"):
            held = await _run(env, "hook", stdin=_hook(stuck, hook_event_name="PreCompact", trigger=trigger))
            assert held[:2] == (0, "")

        # the agent runs the command it was told, in a shell with only the API's URL and the worker token
        agent_env = {k: v for k, v in env.items() if k != "CTXBUDGET_PROJECT_ID"}
        part = {"summary": "Stuck on the schema.", "open_questions": [], "next_actions": [], "decision_links": []}
        code, out, err = await _run(
            agent_env, "handoff", "write", "--thread", stuck, "--cwd", str(tmp_path), stdin=json.dumps(part)
        )
        assert code == 0, err
        await _until(
            f"{api}/api/v1/threads/{stuck}/context-budget",
            token,
            lambda d: d["handoff_package_status"] == "ready" and d["project_id"] == PROJECT,
            within=90,
            what="the agent's ready package",
        )


def _post(url: str, token: str, package: HandoffPackage) -> dict:
    request = urllib.request.Request(
        url,
        data=encode_record(package),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())
