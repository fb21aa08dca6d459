"""The real Claude Code 2.1.328 and Codex CLI 0.169.0 against the scripted model (docs/real-tools.md): they compact
automatically and by hand, run hooks (Codex's once trusted), follow ctxbudget's handoff instruction through their own
shell tool, and their transcripts and rollouts read by the reporter's tailers give the usage the model reported.

The binaries come from `make test` (tests/realtools/tools.py); when they are missing the tests fail and say how to
install them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reporter.claude_code.transcripts import TranscriptTailer
from reporter.codex.rollouts import RolloutTailer
from reporter.codex.trust import trust_entries
from reporter.hooks.actions import handoff_command, instruction
from tests.realtools.model_server import Api, Kind, ModelServer, Script
from tests.realtools.sessions import ClaudeSession, CodexSession, Hooks
from tests.realtools.tools import Tools, tools

pytestmark = pytest.mark.agent_tools

# Claude Code compacts once the last reply's input + output reach about 177,000: 20,000 + 16,000 x 10 steps.
CLAUDE_SCRIPT = Script(base_tokens=20_000, tokens_per_step=16_000, steps_per_turn=14)
# Codex compacts once the last total reaches 0.9 x 272,000 = 244,800: 20,000 + 15,000 x 15 steps (+ 200 output).
# Every step stays under the usable window Codex reports (258,400).
CODEX_SCRIPT = Script(base_tokens=20_000, tokens_per_step=15_000, steps_per_turn=18)
CONVERSATION = (Kind.STEP, Kind.OBEY, Kind.END_TURN)
"""Answers that are the agent's turn (a compaction's summary is not)."""


@pytest.fixture(scope="module")
def binaries() -> Tools:
    return tools()


@dataclass
class Played:
    server: ModelServer
    session: Any


@pytest.fixture(scope="module")
def claude_auto_then_manual(binaries: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    """One Claude Code session: a turn that climbs past the compaction point, then `/compact`."""
    with ModelServer(claude=CLAUDE_SCRIPT) as server:
        session = ClaudeSession(binaries.claude, server, tmp_path_factory.mktemp("claude"))
        session.turn("Work through the script.").check()
        session.compact().check()
        yield Played(server, session)


@pytest.fixture(scope="module")
def codex_auto(binaries: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    """One Codex `exec` turn that climbs past the compaction point."""
    with ModelServer(codex=CODEX_SCRIPT) as server:
        session = CodexSession(binaries.codex, server, tmp_path_factory.mktemp("codex"))
        session.turn("Work through the script.").check()
        yield Played(server, session)


def test_claude_code_compacts_automatically_then_by_hand(claude_auto_then_manual: Played) -> None:
    server, session = claude_auto_then_manual.server, claude_auto_then_manual.session
    triggers = [boundary["compactMetadata"]["trigger"] for boundary in session.compactions()]
    assert triggers == ["auto", "manual"]
    exchanges = server.of(Api.ANTHROPIC)
    first = [e.kind for e in exchanges].index(Kind.COMPACTION)
    assert exchanges[first - 1].total_tokens >= 177_000, "Claude Code compacted before its measured point"
    assert all(e.total_tokens < 177_000 for e in exchanges[: first - 1])
    assert session.compactions()[0]["compactMetadata"]["preTokens"] >= exchanges[first - 1].total_tokens
    assert len(server.of(Api.ANTHROPIC, Kind.COMPACTION)) == 2
    # after the automatic compaction the conversation is the summary: the usage starts low again
    after = exchanges[first + 1]
    assert after.context_tokens < CLAUDE_SCRIPT.usage_tokens(3)
    assert any(record.get("isCompactSummary") for record in session.records())
    assert (session.work / "notes.txt").read_text().count("step-") >= 3, "the agent's commands did not run"


def test_codex_exec_compacts_automatically(codex_auto: Played) -> None:
    server, session = codex_auto.server, codex_auto.session
    assert len(session.compactions()) == 1
    kinds = [e.kind for e in server.exchanges]
    crossing = server.exchanges[kinds.index(Kind.COMPACTION) - 1]
    assert crossing.total_tokens >= 244_800
    assert all(e.total_tokens < 244_800 for e in server.exchanges[: kinds.index(Kind.COMPACTION) - 1])
    events = [r["payload"]["type"] for r in session.records() if r["type"] == "event_msg"]
    assert "context_compacted" in events or any(
        r["type"] == "event_msg" and r["payload"].get("item", {}).get("type") == "ContextCompaction"
        for r in session.records()
    )
    assert kinds[-1] is Kind.END_TURN, "the turn did not go on after the compaction"


def test_claude_transcript_readings_are_the_usage_the_model_reported(
    claude_auto_then_manual: Played, tmp_path: Path
) -> None:
    server, session = claude_auto_then_manual.server, claude_auto_then_manual.session
    tailer = TranscriptTailer(session.home / ".claude" / "projects", tmp_path / "state.json", watch=False)
    readings = [r for r in tailer.poll() if not r.usage_stale]
    # Claude Code compares prompt + output of the last reply with its compaction point (docs/real-tools.md)
    reported = [e.total_tokens for e in server.of(Api.ANTHROPIC) if e.kind in CONVERSATION]
    assert [r.last_usage.total_tokens for r in readings] == reported
    assert [r.thread_id for r in readings] == [session.session_id] * len(readings)
    assert {e.session for e in server.exchanges} == {session.session_id}
    assert readings[-1].compaction_count == 1
    assert tailer.state_of(session.transcript).compaction_count == 2


def test_codex_rollout_readings_are_the_usage_the_model_reported(codex_auto: Played, tmp_path: Path) -> None:
    server, session = codex_auto.server, codex_auto.session
    tailer = RolloutTailer(session.codex_home / "sessions", tmp_path / "state.json", watch=False)
    readings = [r for r in tailer.poll() if not r.usage_stale]
    # Codex writes its own estimate of the compacted context (a total without input or output) after compacting
    estimates = [r for r in readings if r.last_usage.input_tokens == 0 and r.last_usage.output_tokens == 0]
    assert len(estimates) == 1
    reported = [e.total_tokens for e in server.of(Api.OPENAI) if e.kind in CONVERSATION]
    # Codex writes each usage twice, the second time saying whether it counts reasoning: one usage, read again
    totals = [r.last_usage.total_tokens for r in readings if r not in estimates]
    assert [t for i, t in enumerate(totals) if i == 0 or t != totals[i - 1]] == reported
    assert {r.thread_id for r in readings} == {session.thread_id}
    assert {e.session for e in server.exchanges} == {session.thread_id}
    assert readings[-1].compaction_count == 1


# --- hooks and the handoff instruction ------------------------------------------------------------------------------


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def stop_hook_once(folder: Path) -> tuple[Hooks, Path]:
    """A Stop hook that blocks the first stop with ctxbudget's instruction (its program a recorder of its argv and
    stdin), and the file the recorder writes."""
    recorded = folder / "recorded.jsonl"
    recorder = executable(
        folder / "bin" / "record-handoff",
        f"#!{sys.executable}\nimport json, sys\n"
        f"with open({str(recorded)!r}, 'a') as out:\n"
        "    out.write(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}) + '\\n')\n",
    )
    # the instruction exactly as the hooks word it, with the recorder as the program
    template = instruction(handoff_command(str(recorder), "THREAD"))
    hook = executable(
        folder / "bin" / "stop-hook",
        f"#!{sys.executable}\nimport json, pathlib, sys\n"
        f"seen = pathlib.Path({str(folder / 'stop-hook-blocked')!r})\n"
        "event = json.load(sys.stdin)\n"
        "if not seen.exists():\n"
        "    seen.write_text(event['session_id'])\n"
        f"    reason = {template!r}.replace('THREAD', event['session_id'])\n"
        "    print(json.dumps({'decision': 'block', 'reason': reason}))\n",
    )
    return {"Stop": [{"hooks": [{"type": "command", "command": str(hook), "timeout": 30}]}]}, recorded


def assert_handoff_written(recorded: Path, thread_id: str, server: ModelServer, api: Api) -> None:
    calls = [json.loads(line) for line in recorded.read_text().splitlines()] if recorded.exists() else []
    assert len(calls) == 1, f"the instructed command ran {len(calls)} times"
    assert calls[0]["argv"] == ["handoff", "write", "--thread", thread_id]
    handoff = json.loads(calls[0]["stdin"])
    assert isinstance(handoff["summary"], str)
    assert handoff["summary"]
    assert all(isinstance(handoff[key], list) for key in ("open_questions", "next_actions", "decision_links"))
    obeyed = server.of(api, Kind.OBEY)
    assert len(obeyed) == 1
    assert obeyed[0].instruction is not None
    assert obeyed[0].instruction.endswith(f"handoff write --thread {thread_id}")


def test_claude_code_agent_runs_the_handoff_a_stop_hook_asks_for(binaries: Tools, tmp_path: Path) -> None:
    hooks, recorded = stop_hook_once(tmp_path / "hook")
    with ModelServer(claude=Script(steps_per_turn=2)) as server:
        session = ClaudeSession(binaries.claude, server, tmp_path / "claude", hooks=hooks, auto_compact=False)
        session.turn("Work through the script.").check()
        assert_handoff_written(recorded, session.session_id, server, Api.ANTHROPIC)
        # the agent went on with its script after the handoff, and stopped (the hook blocks once)
        assert [e.kind for e in server.exchanges][-1] is Kind.END_TURN


def test_codex_agent_runs_the_handoff_a_trusted_stop_hook_asks_for(binaries: Tools, tmp_path: Path) -> None:
    hooks, recorded = stop_hook_once(tmp_path / "hook")
    with ModelServer(codex=Script(steps_per_turn=2)) as server:
        session = CodexSession(binaries.codex, server, tmp_path / "codex", hooks=hooks)
        session.turn("Work through the script.").check()
        assert session.thread_id is not None
        assert_handoff_written(recorded, session.thread_id, server, Api.OPENAI)
        assert [e.kind for e in server.exchanges][-1] is Kind.END_TURN


def test_codex_skips_an_untrusted_stop_hook(binaries: Tools, tmp_path: Path) -> None:
    """Why the trust matters: without it `codex exec` never runs the hook, and says nothing."""
    hooks, recorded = stop_hook_once(tmp_path / "hook")
    with ModelServer(codex=Script(steps_per_turn=1)) as server:
        session = CodexSession(binaries.codex, server, tmp_path / "codex", hooks=hooks, trust_hooks=False)
        session.turn("Work through the script.").check()
        assert not (tmp_path / "hook" / "stop-hook-blocked").exists()
        assert not recorded.exists()
        assert server.of(Api.OPENAI, Kind.OBEY) == []


def test_codex_trusts_the_hashes_we_write(binaries: Tools, tmp_path: Path) -> None:
    """The trust recipe against the binary: `hooks/list` of the real app-server computes the same keys and hashes,
    and reports every hook trusted once config.toml holds them."""
    hooks: Hooks = {
        "Stop": [{"hooks": [{"type": "command", "command": "/bin/true", "timeout": 5}]}],
        "PreCompact": [
            {"matcher": "auto|manual", "hooks": [{"type": "command", "command": "/bin/echo 'a b'"}]},
            {"hooks": [{"type": "command", "command": "/bin/true"}, {"type": "command", "command": "/bin/false"}]},
        ],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/bin/true", "timeout": 15}]}],
    }
    with ModelServer() as server:
        session = CodexSession(binaries.codex, server, tmp_path / "codex", hooks=hooks)
        session.prepare()
        listed = app_server_hooks(session)
    ours = trust_entries(session.codex_home / "hooks.json")
    assert {hook["key"]: hook["currentHash"] for hook in listed} == ours
    assert {hook["trustStatus"] for hook in listed} == {"trusted"}


def app_server_hooks(session: CodexSession) -> list[dict[str, Any]]:
    """`hooks/list` of a real `codex app-server` in the session's CODEX_HOME."""
    env = {**os.environ, "HOME": str(session.home), **session.tool_env()}
    requests = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "ctxbudget-tests", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(session.work)]}},
    ]
    with subprocess.Popen(
        [str(session.binary), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=session.work,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        watchdog = threading.Timer(30, process.kill)
        watchdog.start()
        try:
            for request in requests:
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
            for line in process.stdout:
                message = json.loads(line)
                if message.get("id") == 2:
                    return [hook for entry in message["result"]["data"] for hook in entry["hooks"]]
        finally:
            watchdog.cancel()
            process.kill()
    raise AssertionError("codex app-server closed without answering hooks/list")
