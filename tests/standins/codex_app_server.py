"""A scripted stand-in for `codex app-server` speaking its v2 JSON-RPC shapes over stdio (one JSON object a line).

The shapes and their order are Codex 0.169.0's (its `generate-json-schema`, and its answers to `initialize` and
`thread/start`, which name the sandbox the thread runs in). After `thread/start` and its first `turn/start` the thread
works on its own, turn after turn: `turn/started`, an `agentMessage` item, `thread/tokenUsage/updated` with usage grown
by `--growth`, `--tail-seconds` more work, `turn/completed`. When usage reaches `--compact-at` it compacts within the
turn, as Codex does: `item/started` of a `contextCompaction` item, the compacted context's usage (`--after`), then the
item's `item/completed`. `thread/compact/start` compacts the same way in a turn of its own. A client may `turn/steer`
the running turn (with its `expectedTurnId`) or `turn/start` one with an `outputSchema` when none runs: that turn then
answers with a handoff in the requested shape. Every request received and the compaction are logged (`--log`, JSON
lines with the time), so a test can tell what happened before what. Exits after `--turns` turns, or when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

SANDBOXES = {"read-only": "readOnly", "workspace-write": "workspaceWrite", "danger-full-access": "dangerFullAccess"}
HANDOFF = {
    "summary": "Stand-in: the parser change is written and its unit tests pass; the integration run is next.",
    "open_questions": ["Should heartbeats count as activity?"],
    "next_actions": ["Run the integration suite", "Open the pull request"],
    "decision_links": ["docs/decisions/0007-heartbeats.md"],
}


class StandIn:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.used = options.start
        self.turns = 0
        self.thread_id: str | None = None
        self.active: str | None = None
        self.answer_in: set[str] = set()
        self.compact_in: set[str] = set()
        self.schemas: dict[str, Any] = {}
        self.log = Path(options.log) if options.log else None
        self.wake = asyncio.Event()
        self.done = asyncio.Event()

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def note(self, what: str, **fields: Any) -> None:
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"at": time.time(), "what": what, **fields}) + "\n")

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if request_id is None:
            return  # `initialized`, or an answer to nothing we asked
        self.note("request", method=method, params=params)
        if method == "initialize":
            result = {"userAgent": "codex-standin/0.0.0", "platformFamily": "unix", "platformOs": "linux"}
            self.send({"id": request_id, "result": result})
        elif method == "thread/start":
            self.thread_id = self.options.thread_id
            sandbox = params.get("sandbox") or "read-only"
            if sandbox not in SANDBOXES:
                self.send({"id": request_id, "error": {"code": -32600, "message": f"unknown variant `{sandbox}`"}})
                return
            thread = {"id": self.thread_id, "status": {"type": "idle"}, "turns": [], "cwd": params.get("cwd")}
            result = {"thread": thread, "model": "gpt-5.5", "approvalPolicy": "on-request"}
            self.send({"id": request_id, "result": result | {"sandbox": {"type": SANDBOXES[sandbox]}}})
            self.send({"method": "thread/started", "params": {"thread": thread}})
        elif method == "thread/compact/start":
            if self.active is not None:
                self.send({"id": request_id, "error": {"code": -32600, "message": "a turn is running"}})
                return
            self.compact_in.add(self._new_turn())
            self.send({"id": request_id, "result": {}})
            self.wake.set()
        elif method == "turn/steer":
            if self.active is None or params.get("expectedTurnId") != self.active:
                self.send({"id": request_id, "error": {"code": -32600, "message": "expectedTurnId is not active"}})
                return
            self.answer_in.add(self.active)
            self.send({"id": request_id, "result": {"turnId": self.active}})
        elif method == "turn/start":
            if self.active is not None:
                self.send({"id": request_id, "error": {"code": -32600, "message": "a turn is running"}})
                return
            turn_id = self._new_turn()
            if params.get("outputSchema") is not None:  # a question: the turn answers in that shape
                self.answer_in.add(turn_id)
                self.schemas[turn_id] = params["outputSchema"]
            self.send({"id": request_id, "result": {"turn": turn(turn_id, "inProgress")}})
            self.wake.set()
        else:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"{method} is not scripted"}})

    def _new_turn(self) -> str:
        self.turns += 1
        self.active = f"turn-{self.turns}"
        return self.active

    async def work(self) -> None:
        await self.wake.wait()
        while self.turns < self.options.turns:
            turn_id = self.active or self._new_turn()
            thread = self.thread_id
            self.send({"method": "turn/started", "params": {"threadId": thread, "turn": turn(turn_id, "inProgress")}})
            if turn_id in self.compact_in:
                self.compact(turn_id, manual=True)
            else:
                await self.step(turn_id)
            self.active = None
            self.note("turn_completed", turn=turn_id)
            self.send({"method": "turn/completed", "params": {"threadId": thread, "turn": turn(turn_id, "completed")}})
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.options.gap_seconds)
        self.done.set()

    async def step(self, turn_id: str) -> None:
        await asyncio.sleep(self.options.turn_seconds)
        answer = turn_id in self.answer_in
        text = json.dumps(HANDOFF) if answer else f"Worked on step {self.turns}."
        self.item("completed", turn_id, {"type": "agentMessage", "id": f"msg-{turn_id}", "text": text})
        if answer:
            self.note("answered", turn=turn_id, output_schema=self.schemas.get(turn_id))
        self.used += self.options.growth
        self.usage(turn_id)
        await asyncio.sleep(self.options.tail_seconds)  # the turn goes on after its message (a steered one too)
        if self.used >= self.options.compact_at:
            self.compact(turn_id)
            await asyncio.sleep(self.options.work_after_compaction_seconds)  # Codex goes on with the turn

    def item(self, phase: str, turn_id: str, item: dict[str, Any]) -> None:
        stamp = {"startedAtMs" if phase == "started" else "completedAtMs": int(time.time() * 1000)}
        params = {"threadId": self.thread_id, "turnId": turn_id, "item": item} | stamp
        self.send({"method": f"item/{phase}", "params": params})

    def usage(self, turn_id: str) -> None:
        last = {"totalTokens": self.used, "inputTokens": self.used - 500, "cachedInputTokens": 0, "outputTokens": 500}
        usage = {"total": last, "last": last, "modelContextWindow": self.options.window}
        params = {"threadId": self.thread_id, "turnId": turn_id, "tokenUsage": usage}
        self.send({"method": "thread/tokenUsage/updated", "params": params})

    def compact(self, turn_id: str, manual: bool = False) -> None:
        """As Codex does: the item starts, the compacted context's usage is sent, then the item completes."""
        item = {"type": "contextCompaction", "id": f"compact-{turn_id}"}
        self.item("started", turn_id, item)
        self.note("compacted", turn=turn_id, tokens_before=self.used, manual=manual)
        self.used = self.options.after
        self.usage(turn_id)
        self.item("completed", turn_id, item)


def turn(turn_id: str, status: str) -> dict[str, Any]:
    return {"id": turn_id, "items": [], "status": status}


async def main(options: argparse.Namespace) -> None:
    stand_in = StandIn(options)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    worker = asyncio.create_task(stand_in.work())

    async def read() -> None:
        while line := await reader.readline():
            if line.strip():
                stand_in.handle(json.loads(line))

    reading = asyncio.create_task(read())
    await asyncio.wait({reading, asyncio.create_task(stand_in.done.wait())}, return_when=asyncio.FIRST_COMPLETED)
    worker.cancel()
    reading.cancel()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--thread-id", default="thr_standin")
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--start", type=int, default=60_000)
    parser.add_argument("--growth", type=int, default=12_000)
    parser.add_argument("--compact-at", type=int, default=180_000)
    parser.add_argument("--after", type=int, default=30_000)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--turn-seconds", type=float, default=1.0)
    parser.add_argument("--gap-seconds", type=float, default=0.5)
    parser.add_argument("--tail-seconds", type=float, default=0.0)
    parser.add_argument("--work-after-compaction-seconds", type=float, default=0.0)
    parser.add_argument("--log", default=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
