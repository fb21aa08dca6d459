"""A real Claude Code transcript and a real Codex rollout (tests/data), tailed by one `ctxbudget report` and posted
to the API (5.2, and the session-events route) of a `ctxbudget run` worker, through the pipeline to the conversation's
ring (6.1), the project's ranking (6.2) and the thread page (6.3).

The files are the published ones, re-timed so that their last record is now (the API refuses reports from days ago);
every other byte of each record is as published.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.profiles import DEFAULT_CODEX_VERSION
from core.settings import Settings
from reporter.claude_code.transcripts import TranscriptTailer
from reporter.codex.rollouts import RolloutTailer
from reporter.delivery.spooled import REJECTED_NAME
from reporter.readings import Identity, Reading, to_snapshot
from schemas import Conversation, ConversationType, ThreadContextSnapshot
from streams.aggregates.resolution import ring_percent
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, get_json, get_when_up, produce, until_listed
from tests.integration.test_end_to_end import _until_found

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

DATA = Path(__file__).parents[1] / "data"
CLAUDE_FILE = DATA / "claude_code" / "spotter-manual-compaction-excerpt.jsonl"
CLAUDE_THREAD = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
CODEX_FILE = DATA / "codex" / "localpush-compaction-excerpt-019c8a59.jsonl"
CODEX_THREAD = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
PROJECT, WORKER, NODE = "proj-tools", "worker-tools", "node-tools"


def retimed(source: Path, target: Path, now: datetime) -> None:
    """The file with every record's `timestamp` moved by the same amount, so that the last one is `now`."""
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    times = [datetime.fromisoformat(r["timestamp"]) for r in records if "timestamp" in r]
    shift = now - max(times)
    for record in records:
        if "timestamp" in record:
            record["timestamp"] = (datetime.fromisoformat(record["timestamp"]) + shift).isoformat()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


@dataclass(frozen=True)
class Tool:
    source: str
    directory: Path
    thread: str
    conversation: str
    last: ThreadContextSnapshot
    """What the reporter's own derivation makes of the file's last reading (in process, no pipeline)."""


def _last_snapshot(readings: list[Reading]) -> ThreadContextSnapshot:
    identity = Identity(node_id=NODE, worker_id=WORKER, project_id=PROJECT)
    return to_snapshot(readings[-1], identity, DEFAULT_CODEX_VERSION)


def _tools(tmp_path: Path, now: datetime) -> list[Tool]:
    claude_dir = tmp_path / "claude" / "projects"
    retimed(CLAUDE_FILE, claude_dir / "-home-u-repo" / f"{CLAUDE_THREAD}.jsonl", now)
    codex_dir = tmp_path / "codex" / "sessions"
    retimed(CODEX_FILE, codex_dir / "2026" / "12" / "02" / f"rollout-2026-12-02T00-00-00-{CODEX_THREAD}.jsonl", now)
    claude = TranscriptTailer(claude_dir, tmp_path / "expect-claude.json").poll()
    codex = RolloutTailer(codex_dir, tmp_path / "expect-codex.json").poll()
    return [
        Tool("claude-code", claude_dir, CLAUDE_THREAD, "conv-claude", _last_snapshot(claude)),
        Tool("codex-rollouts", codex_dir, CODEX_THREAD, "conv-codex", _last_snapshot(codex)),
    ]


async def _start_report(tools: list[Tool], tmp_path: Path, api: str, token: str) -> asyncio.subprocess.Process:
    """One `ctxbudget report` tailing both tools' directories."""
    sources = [arg for tool in tools for arg in ("--from", tool.source)]
    directories = [arg for tool in tools for arg in ("--dir", str(tool.directory))]
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streams", "report", *sources, *directories, "--spool-dir", str(tmp_path / "spool"),
        "--poll-seconds", "0.2", "--node-id", NODE, "--worker-id", WORKER, "--project-id", PROJECT,
        "--api-url", api, "--token", token,
        env={**os.environ, "CTXBUDGET_DATA_DIR": str(tmp_path / "reporter")},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


async def _stop(process: asyncio.subprocess.Process) -> str:
    if process.returncode is None:
        process.send_signal(signal.SIGINT)
    async with asyncio.timeout(60):
        output, _ = await process.communicate()
    return output.decode(errors="replace")


async def test_a_claude_transcript_and_a_codex_rollout_reach_the_ring_the_ranking_and_the_thread_page(
    settings: Settings, tmp_path: Path, worker_state: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    tools = _tools(tmp_path, datetime.now(UTC) - timedelta(seconds=5))
    port = free_port()
    worker = WorkerProcess(settings, tmp_path / "worker", CTXBUDGET_API_PORT=str(port), CTXBUDGET_STALE_FACTOR="1000")
    worker.start()
    api = f"http://127.0.0.1:{port}"
    reports: list[asyncio.subprocess.Process] = []
    try:
        async with Outputs(settings) as outputs:
            await asyncio.to_thread(get_when_up, f"{api}/healthz", 60, worker.alive)
            conversations = [
                Conversation(
                    conversation_id=tool.conversation,
                    conversation_type=ConversationType.SINGLE_DEVICE,
                    project_id=PROJECT,
                    project_title="Agent tools",
                    thread_ids=[tool.thread],
                    updated_at=datetime.now(UTC),
                )
                for tool in tools
            ]
            await produce(settings, [("conversations", c.conversation_id, c) for c in conversations])
            secret = token_secret(Settings(data_dir=tmp_path / "worker"), ApiSettings())
            token = issue_token(secret, Role.WORKER, WORKER, [PROJECT], ttl=timedelta(hours=1))
            reports = [await _start_report(tools, tmp_path, api, token)]

            def state(o: Outputs, thread: str) -> dict | None:
                return o.latest_states().get(thread)

            def reached(o: Outputs, tool: Tool) -> bool:
                found = state(o, tool.thread) or {}
                return (found.get("source_kind"), found.get("compaction_count")) == (
                    tool.last.source_kind.value,
                    tool.last.compaction_count,
                )

            for tool in tools:
                await outputs.wait_for(lambda o, t=tool: reached(o, t), within=120, what=f"the {tool.source} thread")
            # The rollout's session events reached the projection through the API: its estimate is a snapshot too,
            # judged beside the reporter's. codex_sdk ranks first, so the estimate is accepted only if it reached the
            # engine before the reporter's first snapshot, and shadowed after it; either way the ring ends on the
            # reporter's budget. (Both are keyed by thread: one partition, so the verdicts come in the engine's order.)
            codex = tools[1]

            def verdicts(o: Outputs) -> list[tuple[str, str]]:
                judged = [v for v in o.records["snapshot-verdicts"] if v["snapshot"]["thread_id"] == codex.thread]
                return [(v["snapshot"]["source_kind"], v["verdict"]) for v in judged]

            await outputs.wait_for(
                lambda o: any(kind == "worker_estimator" for kind, _ in verdicts(o)),
                within=60,
                what="the engine's verdict on the projection's estimate of the Codex thread",
            )
            judged = verdicts(outputs)
            first = next(i for i, (kind, _) in enumerate(judged) if kind == "worker_estimator")
            reported_before = ("codex_sdk", "accept") in judged[:first]
            assert judged[first][1] == ("shadowed" if reported_before else "accept"), judged
            codex_state = state(outputs, codex.thread) or {}
            assert round(codex_state["context_budget_remaining_pct"], 6) == round(
                codex.last.context_budget_remaining_pct, 6
            )

            operator = issue_token(secret, Role.OPERATOR, "e2e", ttl=timedelta(hours=1))
            for tool in tools:
                thread_state = state(outputs, tool.thread) or {}
                shown = math.floor(thread_state["context_budget_remaining_pct"])
                listed = await until_listed(api, operator, tool.conversation, within=60, percent=shown)
                ring = listed["context_budget_indicator"]
                assert ring["level"] == thread_state["context_budget_level"]
                # 6.3: the thread page's detail, with what the agent tool itself shows beside the ring
                detail = await _until_found(f"{api}/api/v1/threads/{tool.thread}/context-budget", operator, 60)
                assert detail["compaction_count"] == tool.last.compaction_count
                await _until_shown(api, operator, tool)

            # 6.2: the project's ranking names both threads with the engine's budget and level; only an urgent or
            # critical thread can be the next compaction risk
            # (At the resolution a reader sees: the view is not republished for a change below it, such as the Claude
            # thread's reporter reading, prompt + output, after the projection's estimate of the reply, prompt only.)
            states = {t.thread: state(outputs, t.thread) or {} for t in tools}
            expected = {
                k: (ring_percent(s["context_budget_remaining_pct"]), s["context_budget_level"])
                for k, s in states.items()
            }
            project = await _until_ranked(api, operator, expected, within=60)
            ranked = {t["thread_id"]: t for t in project["active_thread_contexts"]}
            assert {ranked[t.thread]["node_id"] for t in tools} == {NODE}
            at_risk = [t for t in ranked.values() if t["context_budget_level"] in ("urgent", "critical")]
            assert project["next_compaction_risk_thread_id"] == (at_risk[0]["thread_id"] if at_risk else None)
    finally:
        logs = [await _stop(report) for report in reports]
        assert worker.stop() == 0, worker.output()
    for log in logs:
        assert "rejected a" not in log, log  # the API admitted every snapshot and session event
    assert not (tmp_path / "spool" / REJECTED_NAME).exists()
    assert (worker_state / "claude-code.json").is_file()
    assert (worker_state / "rollouts.json").is_file()


async def _until_shown(api: str, token: str, tool: Tool) -> None:
    """The detail's agent tool and shown percent come from the snapshot history, written by its own sink."""
    url = f"{api}/api/v1/threads/{tool.thread}/context-budget"
    deadline = asyncio.get_running_loop().time() + 60
    expected = {"agent_tool": tool.last.agent_tool, "model": tool.last.model}
    while True:
        detail = await asyncio.to_thread(get_json, url, token)
        if {k: detail.get(k) for k in expected} == expected and detail.get("shown_remaining_pct") is not None:
            assert detail["shown_remaining_pct"] == pytest.approx(tool.last.shown_remaining_pct)
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{tool.thread}: no agent tool view within 60 s: {detail}")
        await asyncio.sleep(0.5)


async def _until_ranked(api: str, token: str, expected: dict[str, tuple[int, str]], within: float) -> dict:
    """The project once its ranking names every thread with the expected (ring percent, level)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            project = await asyncio.to_thread(get_json, f"{api}/api/v1/projects/{PROJECT}", token)
        except OSError:
            project = {}
        ranked = {
            t["thread_id"]: (ring_percent(t["context_budget_remaining_pct"]), t["context_budget_level"])
            for t in project.get("active_thread_contexts", [])
        }
        if all(ranked.get(thread) == value for thread, value in expected.items()):
            return project
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the ranking does not show {expected} within {within} s: {project}")
        await asyncio.sleep(0.5)
