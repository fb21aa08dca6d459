"""A scripted model for the real agent tools: the project's test double of the *model*, never of the tool.

One HTTP server on 127.0.0.1 speaks both vendors' streaming APIs, as Claude Code 2.1.328 and Codex CLI 0.169.0 call
them (docs/real-tools.md): Anthropic Messages (`POST /v1/messages[?beta=true]`, `/v1/messages/count_tokens`) and
OpenAI Responses (`POST /v1/responses`). It plays an obedient agent, derived from each request alone:

- usage climbs with the conversation: `base_tokens + tokens_per_step x` the assistant turns in the request, so the
  first request after a compaction (whose history is a summary) is low again;
- each step runs the next command of the script through the tool's own shell tool, and the turn ends with a text
  once `steps_per_turn` tool calls followed the last user text;
- a compaction prompt (Claude Code's summary request, Codex's "handoff summary for another LLM") is answered with a
  summary text;
- when any text of the request (a prompt, a hook's block reason or added context, a tool result) holds ctxbudget's
  instruction to run `... handoff write --thread <id> ...` and no tool call ran it since, the next step runs exactly
  that command with a handoff JSON on stdin.

Every answer is recorded (`ModelServer.exchanges`) for the tests to inspect. No pytest here: `bench/` uses it too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shlex
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

# The instruction of reporter/hooks/actions.py `instruction()`: a backquoted command naming `handoff write --thread`.
INSTRUCTION = re.compile(r"`([^`\n]*handoff write --thread[^`\n]*)`")
HANDOFF_CALL = "handoff write --thread"
# Claude Code's compaction request ends with a user message asking for a summary of the conversation; Codex's
# compaction prompt asks for "a handoff summary for another LLM that will resume the task".
CLAUDE_COMPACTION = re.compile(r"create a detailed summary of the conversation", re.IGNORECASE)
CODEX_COMPACTION = re.compile(r"handoff summary for another LLM", re.IGNORECASE)
SUMMARY_PREFIX = "Summary of the work so far (scripted model)."
# Written into a summary when the agent had run its instructed handoff: Codex keeps the user messages (a Stop hook's
# reason among them) across a compaction but not the tool calls, so the summary says the instruction was done.
OBEYED_MARK = "[ctxbudget handoff already written]"
# The tool calls of the turn so far, written into a summary: a compaction mid-turn drops them, and the turn must still
# end after `steps_per_turn` calls instead of starting over (and compacting again) forever.
TURN_STEPS = re.compile(r"\[steps of this turn: (\d+)\]")
# reporter/relay/agent_handoff.py `ask_text()`: the reporter, as Codex's app-server client, asks the agent itself
# (turn/steer into the running turn, or turn/start) for its part of the handoff, answered as one JSON object.
ASK = re.compile(r"ctxbudget: the context budget asks for `")
# reporter/relay/resume.py `resume_prompt()`'s opening: the thread starts from a handoff package.
RESUMED = "You are continuing the work of thread"

DEFAULT_COMMANDS = (
    "echo step-{step} >> notes.txt",
    "git status --short",
    "ls -la",
    "cat notes.txt | wc -l",
)


class Api(StrEnum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"


SESSION_HEADERS = {Api.ANTHROPIC: "x-claude-code-session-id", Api.OPENAI: "thread-id"}
"""Where each tool names its session in a request (one server serves many sessions)."""


class Kind(StrEnum):
    STEP = "step"
    """A tool call of the script."""
    OBEY = "obey"
    """The tool call that runs an instruction's `handoff write`."""
    END_TURN = "end_turn"
    """The text that ends a turn."""
    COMPACTION = "compaction"
    """The summary answering the tool's compaction prompt."""
    ANSWER = "answer"
    """The handoff JSON answering the reporter's question (ASK), then the next step of the turn if it has one."""
    SIDE = "side"
    """A request outside the conversation (a title, a quota check): a short text."""


@dataclass(frozen=True)
class Script:
    """How the scripted agent behaves. Usage = `base_tokens + tokens_per_step x assistant turns in the request`."""

    base_tokens: int = 20_000
    tokens_per_step: int = 10_000
    output_tokens: int = 200
    steps_per_turn: int = 3
    commands: tuple[str, ...] = DEFAULT_COMMANDS
    handoff: dict[str, Any] = field(
        default_factory=lambda: {
            "summary": "Scripted agent: appended steps to notes.txt and checked git status.",
            "open_questions": ["Is the scripted work complete?"],
            "next_actions": ["Run the test command again"],
            "decision_links": [],
        }
    )

    step_seconds: float = 0.0
    """How long the model thinks before each answer of the conversation: a real agent's steps take seconds, and the
    pipeline's reaction is measured against that pace."""

    def usage_tokens(self, assistant_turns: int) -> int:
        return self.base_tokens + self.tokens_per_step * assistant_turns


@dataclass(frozen=True)
class Exchange:
    """One request answered."""

    api: Api
    kind: Kind
    path: str
    context_tokens: int
    """What the usage reports as the context: Anthropic input + cache creation + cache read; OpenAI input."""
    output_tokens: int
    assistant_turns: int
    command: str | None = None
    """The shell command of a STEP or OBEY."""
    instruction: str | None = None
    """The instructed command this answer obeys (OBEY only)."""
    model: str | None = None
    session: str | None = None
    """The tool's session (Claude Code's `x-claude-code-session-id`, Codex's `thread-id` header): one server can
    serve many sessions."""
    at: float = field(default_factory=time.time)
    resumed: bool = False
    """The request carries a resume prompt (a SessionStart hook's context after a compaction, a relay's first input)."""

    @property
    def total_tokens(self) -> int:
        return self.context_tokens + self.output_tokens


@dataclass(frozen=True)
class Conversation:
    """A request reduced to what the script needs, the same for both APIs."""

    events: tuple[tuple[str, str], ...]
    """In order: ("text", text of a message or tool result) and ("call", a tool call's command)."""
    assistant_turns: int
    last_user_text: str
    calls_since_user_text: int

    @property
    def resumed(self) -> bool:
        return any(kind == "text" and RESUMED in text for kind, text in self.events)


def pending_instruction(conversation: Conversation) -> str | None:
    """The instructed command to run now: the last instruction seen with no handoff call after it."""
    pending = None
    for kind, text in conversation.events:
        if (kind == "call" and HANDOFF_CALL in text) or (kind == "text" and OBEYED_MARK in text):
            pending = None
        elif kind == "text":
            found = INSTRUCTION.findall(text)
            if found:
                pending = found[-1]
    return pending


def pending_ask(conversation: Conversation, handoff: dict[str, Any]) -> bool:
    """The reporter asked for the handoff (ASK) and no answer of it followed."""
    answer = json.dumps(handoff)
    pending = False
    for kind, text in conversation.events:
        if kind == "text" and ASK.search(text):
            pending = True
        elif kind == "text" and (answer in text or OBEYED_MARK in text):
            pending = False
    return pending


def obey_command(instructed: str, handoff: dict[str, Any]) -> str:
    """The instructed command with the handoff JSON on stdin (a quoted heredoc: no expansion of the JSON)."""
    return f"{instructed} <<'CTXBUDGET_HANDOFF'\n{json.dumps(handoff)}\nCTXBUDGET_HANDOFF"


def next_move(conversation: Conversation, script: Script, compaction: bool) -> tuple[Kind, str | None, str | None]:
    """(kind, shell command, instruction obeyed) of the next answer."""
    if compaction:
        return Kind.COMPACTION, None, None
    instructed = pending_instruction(conversation)
    if instructed is not None:
        return Kind.OBEY, obey_command(instructed, script.handoff), instructed
    if pending_ask(conversation, script.handoff):
        return Kind.ANSWER, _step_command(conversation, script), None
    if conversation.calls_since_user_text >= script.steps_per_turn:
        return Kind.END_TURN, None, None
    return Kind.STEP, _step_command(conversation, script), None


def _step_command(conversation: Conversation, script: Script) -> str | None:
    """The script's next command; None when the turn has had its steps."""
    if conversation.calls_since_user_text >= script.steps_per_turn:
        return None
    step = conversation.assistant_turns + 1
    return script.commands[conversation.assistant_turns % len(script.commands)].format(step=step)


def summary_text(conversation: Conversation, handoff: dict[str, Any]) -> str:
    """The compaction's summary. It quotes nothing of the conversation, so no prompt or instruction lives on in it;
    it says whether the handoff was written (run as instructed, or answered when asked)."""
    answer = json.dumps(handoff)
    obeyed = any(
        (kind == "call" and HANDOFF_CALL in text) or OBEYED_MARK in text or answer in text
        for kind, text in conversation.events
    )
    text = f"{SUMMARY_PREFIX} {conversation.assistant_turns} assistant turns so far; next: continue the script."
    text += f" [steps of this turn: {conversation.calls_since_user_text}]"
    text += f" {OBEYED_MARK}" if obeyed else ""
    # Claude Code asks again, with a reminder, for a reply that lacks the <summary> block.
    return f"<analysis>Scripted.</analysis>\n<summary>{text}</summary>"


def turn_start(text: str) -> int:
    """The tool calls of the turn before `text`, a user message: 0 for a prompt, the count a summary carries."""
    found = TURN_STEPS.search(text)
    return int(found.group(1)) if found else 0


# --- Anthropic Messages ---------------------------------------------------------------------------------------------


def _anthropic_texts(content: Any) -> Iterator[tuple[str, str]]:
    if isinstance(content, str):
        yield "text", content
        return
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            yield "text", block.get("text", "")
        elif kind == "tool_use":
            yield "call", str((block.get("input") or {}).get("command", json.dumps(block.get("input"))))
        elif kind == "tool_result":
            yield from _anthropic_texts(block.get("content"))


def anthropic_conversation(body: dict[str, Any]) -> Conversation:
    events: list[tuple[str, str]] = []
    assistant_turns = 0
    last_user_text = ""
    calls_since = 0
    system = body.get("system")
    if system:
        events.extend(_anthropic_texts(system))
    for message in body.get("messages") or []:
        blocks = list(_anthropic_texts(message.get("content")))
        events.extend(blocks)
        if message.get("role") == "assistant":
            assistant_turns += 1
            calls_since += sum(1 for kind, _ in blocks if kind == "call")
        else:
            content = message.get("content")
            typed_text = isinstance(content, str) or any(
                block.get("type") == "text" and not _is_reminder(block.get("text", "")) for block in content or []
            )
            prompt = typed_text and not any(block.get("type") == "tool_result" for block in _blocks(content))
            if prompt and all(_starts_turn(text) for kind, text in blocks if kind == "text"):
                last_user_text = " ".join(text for kind, text in blocks if kind == "text")
                calls_since = turn_start(last_user_text)
    return Conversation(tuple(events), assistant_turns, last_user_text, calls_since)


def _starts_turn(text: str) -> bool:
    """A user text that starts a turn: not a compaction prompt, nor what the reporter steers into the running turn
    (its question, a resume prompt after the compaction)."""
    return not (CLAUDE_COMPACTION.search(text) or CODEX_COMPACTION.search(text) or ASK.search(text) or RESUMED in text)


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [] if isinstance(content, str) else list(content or [])


def _is_reminder(text: str) -> bool:
    return text.lstrip().startswith("<system-reminder>")


def _anthropic_is_compaction(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    if not messages:
        return False
    return any(CLAUDE_COMPACTION.search(text) for kind, text in _anthropic_texts(messages[-1].get("content")))


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_events(
    model: str, blocks: list[dict[str, Any]], stop_reason: str, context_tokens: int, output_tokens: int
) -> Iterator[bytes]:
    usage = {
        "input_tokens": context_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    message = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield _sse("message_start", {"type": "message_start", "message": message})
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    final_usage = {**usage, "output_tokens": output_tokens}
    yield _sse(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": final_usage},
    )
    yield _sse("message_stop", {"type": "message_stop"})


# --- OpenAI Responses -----------------------------------------------------------------------------------------------


def _openai_content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _call_command(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    command = parsed.get("cmd", parsed.get("command", arguments)) if isinstance(parsed, dict) else arguments
    return shlex.join(command) if isinstance(command, list) else str(command)


def openai_conversation(body: dict[str, Any]) -> Conversation:
    events: list[tuple[str, str]] = []
    assistant_turns = 0
    last_user_text = ""
    calls_since = 0
    if body.get("instructions"):
        events.append(("text", body["instructions"]))
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            text = _openai_content_text(item.get("content"))
            events.append(("text", text))
            if item.get("role") == "assistant":
                assistant_turns += 1
            elif item.get("role") == "user" and _starts_turn(text) and not _is_codex_context(text):
                last_user_text = text
                calls_since = turn_start(text)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            arguments = item.get("arguments") or item.get("input") or json.dumps(item.get("action") or {})
            events.append(("call", _call_command(arguments)))
            assistant_turns += 1
            calls_since += 1
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            output = item.get("output")
            events.append(("text", output if isinstance(output, str) else json.dumps(output)))
    return Conversation(tuple(events), assistant_turns, last_user_text, calls_since)


def _is_codex_context(text: str) -> bool:
    """Codex's own user-role context items (environment, AGENTS.md, instructions), not a prompt."""
    return text.lstrip().startswith(("<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions"))


def _openai_is_compaction(body: dict[str, Any]) -> bool:
    items = body.get("input") or []
    if isinstance(items, str) or not items:
        return False
    last = items[-1]
    return last.get("type", "message") == "message" and bool(
        CODEX_COMPACTION.search(_openai_content_text(last.get("content")))
    )


def shell_tool(tools: Iterable[dict[str, Any]]) -> tuple[str, str]:
    """(name, argument style) of the shell tool a Codex request declares: style "cmd" (exec_command), "string"
    (shell_command) or "argv" (shell)."""
    by_name = {tool.get("name"): tool for tool in tools if tool.get("type") == "function"}
    for name in ("exec_command", "shell_command", "shell"):
        tool = by_name.get(name)
        if tool is None:
            continue
        properties = (tool.get("parameters") or {}).get("properties") or {}
        if "cmd" in properties:
            return name, "cmd"
        if (properties.get("command") or {}).get("type") == "array":
            return name, "argv"
        return name, "string"
    raise ValueError(f"no shell tool among {sorted(str(name) for name in by_name)}")


def openai_call_arguments(style: str, command: str) -> str:
    if style == "cmd":
        return json.dumps({"cmd": command})
    if style == "argv":
        return json.dumps({"command": ["bash", "-lc", command]})
    return json.dumps({"command": command})


def openai_events(model: str, items: list[dict[str, Any]], input_tokens: int, output_tokens: int) -> Iterator[bytes]:
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    base = {"id": response_id, "object": "response", "model": model, "created_at": int(time.time())}
    yield _sse("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}})
    for index, item in enumerate(items):
        yield _sse(
            "response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": item}
        )
        yield _sse(
            "response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item}
        )
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }
    completed = {**base, "status": "completed", "output": items, "usage": usage}
    yield _sse("response.completed", {"type": "response.completed", "response": completed})


# --- the server -----------------------------------------------------------------------------------------------------


class ModelServer:
    """The scripted model on 127.0.0.1, in a thread of its own (the tools run as subprocesses of sync or async tests).

    `with ModelServer() as server:` then point a tool at `server.anthropic_url` / `server.openai_url`.
    """

    def __init__(
        self,
        claude: Script | None = None,
        codex: Script | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.scripts = {Api.ANTHROPIC: claude or Script(), Api.OPENAI: codex or Script()}
        self.log_dir = log_dir
        self.exchanges: list[Exchange] = []
        self.port = _free_port()
        self._counter = itertools.count()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_url(self) -> str:
        """ANTHROPIC_BASE_URL (Claude Code appends /v1/messages)."""
        return self.url

    @property
    def openai_url(self) -> str:
        """A Codex provider's base_url (Codex appends /responses)."""
        return f"{self.url}/v1"

    def of(self, api: Api, kind: Kind | None = None, session: str | None = None) -> list[Exchange]:
        """The exchanges of one API, of one kind and one session when given."""
        return [
            e
            for e in self.exchanges
            if e.api is api and (kind is None or e.kind is kind) and (session is None or e.session == session)
        ]

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/{path:path}", self._unknown, methods=["GET", "POST", "HEAD"]),
            ]
        )

    def start(self) -> ModelServer:
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="model-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _body(self, request: Request, api: Api) -> dict[str, Any]:
        body = await request.json()
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            name = f"{next(self._counter):04d}-{api}-{request.url.path.strip('/').replace('/', '_')}.json"
            (self.log_dir / name).write_text(json.dumps({"headers": dict(request.headers), "body": body}, indent=1))
        return body

    async def _unknown(self, request: Request) -> Response:
        return JSONResponse(
            {"error": {"type": "not_found", "message": f"no route {request.url.path}"}}, status_code=404
        )

    async def _count_tokens(self, request: Request) -> Response:
        body = await self._body(request, Api.ANTHROPIC)
        conversation = anthropic_conversation(body)
        return JSONResponse({"input_tokens": self.scripts[Api.ANTHROPIC].usage_tokens(conversation.assistant_turns)})

    async def _answered(
        self,
        api: Api,
        request: Request,
        kind: Kind,
        context: int,
        conversation: Conversation,
        command: str | None,
        instructed: str | None,
        model: str,
    ) -> None:
        """Record the answer, then think for the script's time (a side request is answered at once)."""
        script = self.scripts[api]
        session = request.headers.get(SESSION_HEADERS[api])
        self.exchanges.append(
            Exchange(
                api,
                kind,
                request.url.path,
                context,
                script.output_tokens,
                conversation.assistant_turns,
                command,
                instructed,
                model,
                session,
                resumed=conversation.resumed,
            )
        )
        if kind is not Kind.SIDE:
            await asyncio.sleep(script.step_seconds)

    async def _messages(self, request: Request) -> Response:
        body = await self._body(request, Api.ANTHROPIC)
        script = self.scripts[Api.ANTHROPIC]
        conversation = anthropic_conversation(body)
        model = body.get("model", "claude")
        tools = {tool.get("name") for tool in body.get("tools") or []}
        compaction = _anthropic_is_compaction(body)
        if "Bash" not in tools and not compaction:
            kind, command, instructed = Kind.SIDE, None, None
        else:
            kind, command, instructed = next_move(conversation, script, compaction)
        blocks = [{"type": "text", "text": text} for text in _texts(kind, conversation, script)]
        if command is not None:
            call = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": "Bash",
                "input": {"command": command, "description": f"scripted {kind}"},
            }
            blocks.append(call)
        stop_reason = "end_turn" if command is None else "tool_use"
        context = script.usage_tokens(conversation.assistant_turns) if kind is not Kind.SIDE else 100
        await self._answered(Api.ANTHROPIC, request, kind, context, conversation, command, instructed, model)
        events = list(anthropic_events(model, blocks, stop_reason, context, script.output_tokens))
        if not body.get("stream"):
            return JSONResponse(_anthropic_message(model, blocks, stop_reason, context, script.output_tokens))
        return StreamingResponse(_stream(events), media_type="text/event-stream")

    async def _responses(self, request: Request) -> Response:
        body = await self._body(request, Api.OPENAI)
        script = self.scripts[Api.OPENAI]
        conversation = openai_conversation(body)
        model = body.get("model", "gpt")
        kind, command, instructed = next_move(conversation, script, _openai_is_compaction(body))
        items = [
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            for text in _texts(kind, conversation, script)
        ]
        if command is not None:
            name, style = shell_tool(body.get("tools") or [])
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call_id}",
                    "call_id": call_id,
                    "name": name,
                    "arguments": openai_call_arguments(style, command),
                    "status": "completed",
                }
            )
        context = script.usage_tokens(conversation.assistant_turns)
        await self._answered(Api.OPENAI, request, kind, context, conversation, command, instructed, model)
        return StreamingResponse(
            _stream(list(openai_events(model, items, context, script.output_tokens))), media_type="text/event-stream"
        )


def _texts(kind: Kind, conversation: Conversation, script: Script) -> list[str]:
    """The text blocks of an answer: a summary, the handoff JSON, the turn's closing words, or none (a tool call)."""
    if kind is Kind.COMPACTION:
        return [summary_text(conversation, script.handoff)]
    if kind is Kind.ANSWER:
        return [json.dumps(script.handoff)]
    return ["Done."] if kind in (Kind.END_TURN, Kind.SIDE) else []


def _anthropic_message(
    model: str, blocks: list[dict[str, Any]], stop_reason: str, context: int, output: int
) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": context,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output,
        },
    }


async def _stream(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
        await asyncio.sleep(0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
