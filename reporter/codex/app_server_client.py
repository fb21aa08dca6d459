"""The reporter as a Codex app-server client (JSON-RPC 2.0 over stdio, one JSON object a line, no `jsonrpc` field).

Shapes from openai/codex `codex-rs/app-server-protocol` (v2), checked against Codex 0.169.0's own answers:
`initialize {clientInfo}` then the `initialized` notification; `thread/start {cwd?, sandbox}` -> `{thread: {id}}`;
`turn/start {threadId, input: [UserInput], outputSchema?}` -> `{turn: {id}}`; `turn/steer {threadId, input,
expectedTurnId}` -> `{turnId}` (no output schema: the shape is asked for in the text). Notifications `turn/started` /
`turn/completed {threadId, turn: {id, status}}` tell which turn is running, `item/completed` with an `agentMessage`
item carries the agent's text. Every notification line is also handed to `on_line`, which the reporter feeds to
`CodexAppServerParser` for the budget.

`ask` implements the relay's `AgentAsker`: `turn/steer` on a running turn (the agent answers within it), else
`turn/start` with the handoff's output schema. The answer is the first agent message of that turn, completed after the
question, that parses as the handoff: taken at its `item/completed`, not at the turn's end (a steered turn goes on
working, and Codex may compact within it before it ends: the package has to be ready before that).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from reporter.relay.agent_handoff import AgentHandoff, ask_text, output_schema, parse
from schemas import MasterAction

log = logging.getLogger(__name__)

CLIENT_INFO = {"name": "ctxbudget", "title": "ctxbudget reporter", "version": "1"}
MESSAGES_KEPT = 3
"""The latest agent messages of a thread, for a package from facts alone."""
TURNS_KEPT = 32
"""Recent turns whose messages and completion are remembered: an answer may be read before its request returns."""
REQUEST_SECONDS = 60.0


class Sandbox(StrEnum):
    """`thread/start`'s `sandbox` (the protocol's `SandboxMode`). Without one Codex runs the thread read-only, and every
    write of the agent fails; `workspace-write` (the default here, Codex's own for work in a project) lets it edit its
    working directory and nothing else, with no network; `danger-full-access` is the user's explicit choice."""

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


class AppServerError(RuntimeError):
    """The app-server answered a request with a JSON-RPC error, or went away."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def text_input(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


class AppServerClient:
    def __init__(
        self,
        command: Sequence[str],
        on_line: Callable[[str], None] | None = None,
        sandbox: Sandbox = Sandbox.WORKSPACE_WRITE,
    ) -> None:
        self.command = list(command)
        self.on_line = on_line
        self.sandbox = sandbox
        self.on_compact: Callable[[str], None] | None = None
        self.on_compacted: Callable[[str], None] | None = None
        """Told the thread id once a compaction of it completed (the `contextCompaction` item)."""
        self.active_turns: dict[str, str] = {}
        """Per thread, the turn that is running."""
        self._messages: dict[str, deque[str]] = {}
        self._turn_texts: OrderedDict[str, list[str]] = OrderedDict()
        self._completed: OrderedDict[str, None] = OrderedDict()
        self._turn_news: dict[str, asyncio.Event] = {}
        """Per turn asked in: set when an agent message of it completes, or it ends."""
        self._gone = False
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._writes: set[asyncio.Future[None]] = set()

    async def start(self) -> dict[str, Any]:
        """Start the app-server and initialize the connection; returns the `initialize` result."""
        self._process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=16 * 1024 * 1024
        )
        self._reader = asyncio.create_task(self._read(), name="app-server-reader")
        result = await self.request("initialize", {"clientInfo": CLIENT_INFO})
        await self._write({"method": "initialized"})
        return result

    async def close(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                async with asyncio.timeout(5):
                    await process.wait()
            except TimeoutError:
                process.terminate()
                await process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    @property
    def finished(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def wait_closed(self) -> None:
        if self._reader is not None:
            await asyncio.shield(self._reader)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._write({"method": method, "id": request_id, "params": params})
            async with asyncio.timeout(REQUEST_SECONDS):
                return await future
        finally:
            self._pending.pop(request_id, None)

    async def thread_start(self, cwd: str | None = None, first_input: str | None = None) -> str:
        """A new thread; with `first_input` (e.g. a relay thread's resume prompt) its first turn starts with it."""
        params = {"sandbox": self.sandbox.value} | ({"cwd": cwd} if cwd else {})
        result = await self.request("thread/start", params)
        thread_id = str(result["thread"]["id"])
        if first_input:
            await self.turn_start(thread_id, first_input)
        return thread_id

    async def turn_start(self, thread_id: str, text: str, schema: dict[str, Any] | None = None) -> str:
        params: dict[str, Any] = {"threadId": thread_id, "input": text_input(text)}
        if schema is not None:
            params["outputSchema"] = schema
        result = await self.request("turn/start", params)
        return self._track(thread_id, str(result["turn"]["id"]))

    async def turn_steer(self, thread_id: str, text: str, expected_turn_id: str) -> str:
        params = {"threadId": thread_id, "input": text_input(text), "expectedTurnId": expected_turn_id}
        result = await self.request("turn/steer", params)
        return self._track(thread_id, str(result["turnId"]))

    async def tell(self, thread_id: str, text: str) -> bool:
        """Steer `text` into the thread's running turn; False when no turn runs (or it ended meanwhile)."""
        running = self.active_turns.get(thread_id)
        if running is None:
            return False
        try:
            await self.turn_steer(thread_id, text, running)
        except AppServerError as error:
            log.info("app-server: telling thread %r failed (%s)", thread_id, error)
            return False
        return True

    async def compact(self, thread_id: str) -> None:
        """Compact the thread now (`thread/compact/start`); `on_compact` hears of it first, so the compaction that
        follows is known as the reporter's (manual), not Codex's own."""
        if self.on_compact is not None:
            self.on_compact(thread_id)
        await self.request("thread/compact/start", {"threadId": thread_id})

    def latest_messages(self, thread_id: str) -> tuple[str, ...]:
        return tuple(self._messages.get(thread_id, ()))

    async def ask(self, thread_id: str, action: MasterAction) -> AgentHandoff | None:
        """The agent's handoff: steered into the running turn, or a turn of its own with the output schema."""
        async with self._lock:  # one question at a time: two steers into one turn would share its answer
            turn_id, seen = None, 0
            if (running := self.active_turns.get(thread_id)) is not None:
                seen = len(self._turn_texts.get(running, ()))  # the turn's messages before the question answer nothing
                try:
                    turn_id = await self.turn_steer(thread_id, ask_text(action.value), running)
                except AppServerError as error:  # the turn ended meanwhile: ask in a turn of its own
                    log.info("app-server: steering thread %r failed (%s); starting a turn", thread_id, error)
            if turn_id is None:
                seen = 0
                turn_id = await self.turn_start(thread_id, ask_text(action.value), output_schema())
            try:
                return await self._answer(turn_id, seen)
            finally:
                del self._turn_news[turn_id]

    async def _answer(self, turn_id: str, seen: int) -> AgentHandoff | None:
        """The first handoff among the turn's agent messages from index `seen` on, as soon as it completes; None once
        the turn ended (or the server went away) without one."""
        news = self._turn_news[turn_id]
        while True:
            news.clear()
            texts = self._turn_texts.get(turn_id, [])
            for text in texts[seen:]:
                if (handoff := parse(text)) is not None:
                    return handoff
            seen = len(texts)
            if turn_id in self._completed or self._gone:
                return None
            await news.wait()

    def _track(self, thread_id: str, turn_id: str) -> str:
        """Follow a turn we asked in; its notifications may have been read already, before the request returned."""
        self._turn_news.setdefault(turn_id, asyncio.Event())
        if turn_id not in self._completed:
            self.active_turns.setdefault(thread_id, turn_id)
        return turn_id

    @staticmethod
    def _remember(recent: OrderedDict[str, Any], turn_id: str, value: Any) -> Any:
        recent.setdefault(turn_id, value)
        recent.move_to_end(turn_id)
        while len(recent) > TURNS_KEPT:
            recent.popitem(last=False)
        return recent[turn_id]

    async def _write(self, message: dict[str, Any]) -> None:
        if self._process is None or self._process.stdin is None:
            raise AppServerError("the app-server is not started")
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        await self._process.stdin.drain()

    async def _read(self) -> None:
        stdout = self._process.stdout if self._process else None
        if stdout is None:
            raise AppServerError("the app-server has no stdout pipe")
        try:
            while line := await stdout.readline():
                self._take(line.decode("utf-8", errors="replace"))
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(AppServerError("the app-server went away"))
            self._gone = True
            for news in self._turn_news.values():
                news.set()

    def _take(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.debug("app-server: a line that is no JSON: %.200s", line)
            return
        if not isinstance(message, dict):
            return
        method, request_id = message.get("method"), message.get("id")
        if method is None and request_id in self._pending:
            future = self._pending[request_id]
            if "error" in message:
                error = message["error"] or {}
                future.set_exception(AppServerError(str(error.get("message")), error.get("code")))
            else:
                future.set_result(message.get("result"))
            return
        if method is not None and request_id is not None:  # a request of the server's (an approval): not ours
            refusal = self._write({"id": request_id, "error": {"code": -32601, "message": "not handled by ctxbudget"}})
            self._writes.add(task := asyncio.ensure_future(refusal))
            task.add_done_callback(self._writes.discard)
            return
        params = message.get("params") or {}
        if isinstance(params, dict):
            self._notification(str(method), params)
        if self.on_line is not None:
            self.on_line(line)

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            return
        turn = params.get("turn") if isinstance(params.get("turn"), dict) else {}
        if method == "turn/started" and "id" in turn:
            self.active_turns[thread_id] = str(turn["id"])
        elif method == "turn/completed" and "id" in turn:
            turn_id = str(turn["id"])
            if self.active_turns.get(thread_id) == turn_id:
                del self.active_turns[thread_id]
            self._remember(self._completed, turn_id, None)
            self._tell(turn_id)
        elif method == "item/completed":
            item = params.get("item") or {}
            if isinstance(item, dict) and item.get("type") == "contextCompaction" and self.on_compacted is not None:
                self.on_compacted(thread_id)
            if isinstance(item, dict) and item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
                self._messages.setdefault(thread_id, deque(maxlen=MESSAGES_KEPT)).append(item["text"])
                if isinstance(turn_id := params.get("turnId"), str):
                    self._remember(self._turn_texts, turn_id, []).append(item["text"])
                    self._tell(turn_id)

    def _tell(self, turn_id: str) -> None:
        if (news := self._turn_news.get(turn_id)) is not None:
            news.set()
