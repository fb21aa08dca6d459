"""The reporter as the app-server's client, against the scripted stand-in (tests/standins/codex_app_server.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from reporter.codex.app_server import CodexAppServerParser
from reporter.codex.app_server_client import AppServerClient, Sandbox
from reporter.relay.agent_handoff import output_schema
from schemas import MasterAction
from tests.standins.codex_app_server import HANDOFF

STANDIN = Path(__file__).parents[3] / "standins" / "codex_app_server.py"


def standin(log: Path, *args: str) -> list[str]:
    return [sys.executable, str(STANDIN), "--log", str(log), *args]


async def until(condition: Callable[[], bool], within: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():  # the client exposes no event for it: a test polls
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.01)


def logged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_an_idle_thread_is_asked_in_a_turn_of_its_own_with_the_output_schema(tmp_path) -> None:
    log = tmp_path / "standin.jsonl"
    lines: list[str] = []
    command = standin(log, "--turns", "3", "--turn-seconds", "0.05", "--gap-seconds", "30")
    client = AppServerClient(command, lines.append)
    try:
        assert (await client.start())["userAgent"].startswith("codex-standin")
        thread = await client.thread_start(cwd=str(tmp_path), first_input="Resume: apply the patch first.")
        await until(lambda: thread not in client.active_turns)  # the first turn is over: the thread is idle
        handoff = await asyncio.wait_for(client.ask(thread, MasterAction.PREPARE_HANDOFF), 10)
    finally:
        await client.close()
    assert handoff is not None
    assert handoff.model_dump() == HANDOFF
    requests = [entry for entry in logged(log) if entry["what"] == "request"]
    methods = [entry["method"] for entry in requests]
    assert methods == ["initialize", "thread/start", "turn/start", "turn/start"]
    assert requests[2]["params"]["input"] == [{"type": "text", "text": "Resume: apply the patch first."}]
    asked = requests[3]["params"]
    assert asked["threadId"] == thread
    assert asked["outputSchema"] == output_schema()
    assert "prepare_handoff" in asked["input"][0]["text"]
    # the notifications went on to the budget parser's input too
    parser = CodexAppServerParser()
    readings = [r for line in lines if (r := parser.feed(line, datetime.now(UTC))) is not None]
    assert readings
    assert readings[-1].thread_id == thread


async def test_a_running_turn_is_steered_and_answers_within_itself(tmp_path) -> None:
    log = tmp_path / "standin.jsonl"
    client = AppServerClient(standin(log, "--turns", "4", "--turn-seconds", "0.6", "--gap-seconds", "0.05"))
    try:
        await client.start()
        thread = await client.thread_start(first_input="Work on the parser.")
        await until(lambda: thread in client.active_turns)
        running = client.active_turns[thread]
        handoff = await asyncio.wait_for(client.ask(thread, MasterAction.PRE_COMPACTION_WRAP_UP), 10)
    finally:
        await client.close()
    assert handoff is not None
    assert handoff.summary == HANDOFF["summary"]
    steer = [e for e in logged(log) if e.get("method") == "turn/steer"]
    assert len(steer) == 1
    assert steer[0]["params"]["expectedTurnId"] == running
    answered = [e for e in logged(log) if e["what"] == "answered"]
    assert [e["turn"] for e in answered] == [running]


async def test_a_gone_app_server_fails_the_question_instead_of_hanging(tmp_path) -> None:
    client = AppServerClient([sys.executable, "-c", "import sys; sys.stdin.readline()"])
    try:
        started = asyncio.create_task(client.start())
        done, _ = await asyncio.wait({started}, timeout=10)
        assert started in done
        assert started.exception() is not None
    finally:
        await client.close()


async def test_the_answer_is_taken_when_its_message_completes_not_when_the_turn_ends(tmp_path) -> None:
    """Issue 35.4: a steered turn works on (and Codex may compact within it) long after the agent answered."""
    log = tmp_path / "standin.jsonl"
    command = standin(log, "--turns", "2", "--turn-seconds", "0.3", "--tail-seconds", "8", "--gap-seconds", "30")
    client = AppServerClient(command)
    try:
        await client.start()
        thread = await client.thread_start(first_input="Work on the parser.")
        await until(lambda: thread in client.active_turns)
        running = client.active_turns[thread]
        handoff = await asyncio.wait_for(client.ask(thread, MasterAction.PRE_COMPACTION_WRAP_UP), 5)
        assert client.active_turns.get(thread) == running  # the turn still runs
    finally:
        await client.close()
    assert handoff is not None
    assert handoff.summary == HANDOFF["summary"]
    assert not [e for e in logged(log) if e["what"] == "turn_completed"]


async def test_an_idle_threads_answer_is_taken_at_its_message_too(tmp_path) -> None:
    log = tmp_path / "standin.jsonl"
    command = standin(log, "--turns", "3", "--turn-seconds", "0.05", "--tail-seconds", "8", "--gap-seconds", "30")
    client = AppServerClient(command)
    try:
        await client.start()
        thread = await client.thread_start()
        handoff = await asyncio.wait_for(client.ask(thread, MasterAction.PREPARE_HANDOFF), 5)
    finally:
        await client.close()
    assert handoff is not None
    assert [e["method"] for e in logged(log) if e["what"] == "request"][-1] == "turn/start"


def completed(item: dict) -> dict:
    return {"threadId": "thr", "turnId": "turn-1", "item": item, "completedAtMs": 1}


async def test_a_message_completed_before_the_question_is_no_answer(tmp_path) -> None:
    """A handoff-shaped text the running turn wrote before it was steered answers nothing: the agent was not asked."""
    client = AppServerClient(["unused"])
    client.active_turns["thr"] = "turn-1"
    message = {"type": "agentMessage", "id": "m1", "text": json.dumps(HANDOFF)}
    client._take(json.dumps({"method": "item/completed", "params": completed(message)}))
    steered = asyncio.get_running_loop().create_future()

    async def steer(thread_id: str, text: str, expected: str) -> str:
        return client._track(thread_id, await steered)

    client.turn_steer = steer  # type: ignore[method-assign]
    asking = asyncio.create_task(client.ask("thr", MasterAction.PREPARE_HANDOFF))
    steered.set_result("turn-1")
    await asyncio.sleep(0.05)
    assert not asking.done()
    answer = dict(HANDOFF, summary="The answer to the question.")
    message = {"type": "agentMessage", "id": "m2", "text": json.dumps(answer)}
    client._take(json.dumps({"method": "item/completed", "params": completed(message)}))
    handoff = await asyncio.wait_for(asking, 1)
    assert handoff is not None
    assert handoff.summary == "The answer to the question."


async def test_threads_are_started_in_the_chosen_sandbox_workspace_write_by_default(tmp_path) -> None:
    log = tmp_path / "standin.jsonl"
    for sandbox in (None, Sandbox.DANGER_FULL_ACCESS):
        client = AppServerClient(standin(log, "--turns", "1"), **({"sandbox": sandbox} if sandbox else {}))
        try:
            await client.start()
            await client.thread_start(cwd=str(tmp_path))
        finally:
            await client.close()
    started = [e["params"] for e in logged(log) if e.get("method") == "thread/start"]
    assert started == [
        {"cwd": str(tmp_path), "sandbox": "workspace-write"},
        {"cwd": str(tmp_path), "sandbox": "danger-full-access"},
    ]


async def test_a_compaction_the_reporter_asks_for_is_reported_as_manual(tmp_path) -> None:
    log = tmp_path / "standin.jsonl"
    lines: list[str] = []
    parser = CodexAppServerParser()
    command = standin(log, "--turns", "3", "--turn-seconds", "0.05", "--gap-seconds", "30", "--after", "20000")
    client = AppServerClient(command, lines.append)
    client.on_compact = parser.expect_manual
    try:
        await client.start()
        thread = await client.thread_start(first_input="Work on the parser.")
        await until(lambda: thread not in client.active_turns)
        await client.compact(thread)
        await until(lambda: any('"contextCompaction"' in line and "item/completed" in line for line in lines))
    finally:
        await client.close()
    for line in lines:
        parser.feed(line, datetime.now(UTC))
    started, completed = parser.take_events()
    assert (started.trigger_mode, completed.trigger_mode) == ("manual", "manual")
    assert completed.tokens_after == 20_000


async def test_after_a_compaction_within_a_turn_the_resume_prompt_is_steered_into_it(tmp_path) -> None:
    """What run_as_app_server_client does with `on_compacted`: Codex's own summary does not carry the package, so the
    thread is told the package's resume prompt in the turn that goes on after its compaction."""
    log = tmp_path / "standin.jsonl"
    command = standin(
        log, "--turns", "2", "--start", "175000", "--turn-seconds", "0.05", "--work-after-compaction-seconds", "3"
    )
    client = AppServerClient(command)
    told: list[bool] = []

    def compacted(thread: str) -> None:
        told_task = asyncio.ensure_future(client.tell(thread, "You are continuing the work of thread T"))
        told_task.add_done_callback(lambda task: told.append(task.result()))

    client.on_compacted = compacted
    try:
        await client.start()
        thread = await client.thread_start(first_input="Work on the parser.")
        await until(lambda: bool(told))
        idle = await client.tell(thread, "nobody hears this") if thread not in client.active_turns else None
    finally:
        await client.close()
    assert told == [True]
    steers = [entry["params"] for entry in logged(log) if entry.get("method") == "turn/steer"]
    assert [steer["input"][0]["text"] for steer in steers] == ["You are continuing the work of thread T"]
    assert idle in (None, False)  # no running turn: nothing is steered
