"""The MCP server: the master's tools and the project / thread resources, each one REST call (`rest.RestApi`).

Tool names are a contract (the example master and the README's agents call them): list_projects, project_threads,
thread_budget, list_alerts, ack_alert, open_actions, ack_action, complete_action, request_handoff,
thread_handoff_packages, read_handoff_package, consume_handoff_package, request_compaction, relay_schedule. A result
is the API's JSON as structured content (and as text, for clients that read only text); an API error is a tool error
`"<status>: <the API's message>"`.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from api.mcp_server.rest import ApiRefused, RestApi, segment
from api.mcp_server.updates import PROJECTS, THREADS, ResourceUpdates
from schemas import AlertStatus, MasterActionState
from schemas.base import ID_PATTERN, MAX_ID_LENGTH, MAX_SHORT_TEXT_LENGTH

PROJECT_URI = PROJECTS + "{project_id}"
THREAD_URI = THREADS + "{thread_id}"

INSTRUCTIONS = """\
You are the master of a fleet of agent threads whose context windows fill up and get compacted. Each thread has a
budget level from its remaining context (spec 4.1):
- safe: keep working; keep the stage summary fresh.
- watch: the thread must stop appending large context (long logs, whole files, long background); start preparing its
  handoff package. Send new subtasks to healthier threads.
- urgent: the thread finishes its current atomic subtask, then hands off; pre-create its relay thread. Request a
  handoff if none is ready. No new subtasks here.
- critical: compaction is near: wrap up now, no context growth at all; request the handoff first.
Order of work (spec 8.2): critical threads first, and among them those with unsaved work (uncommitted patch,
unrecorded test results, unsaved hardware-test conclusions: `must_finish_before_compaction`, the checklist's
pending_patches), then urgent ones; once a thread's package is ready, read it and consume it into the relay thread
that continues the work. Relays are capped per worker node and per project: ask relay_schedule(project_id) which
threads to relay now (`start`), which wait their turn (`queued`) and which not to relay at all (`futile`: the relay
would start as full as the thread it replaces, or the same work was just relayed; say so instead of relaying). Put
a new subtask where its `new_subtask` says (the healthiest safe thread, or a fresh one). Acknowledge actions you
take on and complete them when done; acknowledge alerts you have handled.
Subscribe to ctxbudget://projects/{project_id} or ctxbudget://threads/{thread_id} to hear when they change (a level
change, a handoff required or ready, an action issued) instead of polling."""

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]


def build_server(rest: RestApi) -> MCPServer:
    updates = ResourceUpdates(rest)
    server = MCPServer(
        "ctxbudget", instructions=INSTRUCTIONS, version="1", subscriptions=updates.bus, middleware=[updates.gate]
    )
    updates.serve_legacy_subscriptions(server)

    async def answer(context: Context, method: str, path: str, **request: Any) -> CallToolResult:
        body = await rest.call(context.headers, method, path, **request)
        text = orjson.dumps(body).decode()
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)

    @server.tool()
    async def list_projects(context: Context) -> CallToolResult:
        """The projects you may see, each with its threads per level (safe / watch / urgent / critical), the next
        thread at compaction risk, how many threads require a handoff now, and `new_subtask_thread_ids` (where new
        subtasks should go, healthiest first). Start here, then look at the projects with critical or urgent threads
        first."""
        return await answer(context, "GET", "/api/v1/projects")

    @server.tool()
    async def project_threads(
        project_id: Annotated[Id, Field(description="A project id from list_projects.")], context: Context
    ) -> CallToolResult:
        """One project's threads ranked by risk (spec 6.2): each thread's remaining percent, level, expected
        compaction and whether it must finish work before compacting; `next_compaction_risk_thread_id`,
        `threads_requiring_handoff` (urgent or critical without a ready package: request their handoff, critical
        first, and among criticals those with unsaved patches / tests / hardware results), and
        `new_subtask_thread_ids` (the only threads to give new subtasks to; never give them to watch, urgent or
        critical threads)."""
        return await answer(context, "GET", f"/api/v1/projects/{segment(project_id)}")

    @server.tool()
    async def thread_budget(
        thread_id: Annotated[Id, Field(description="The thread.")], context: Context
    ) -> CallToolResult:
        """One thread's budget (spec 6.3): percent, level, expected compaction with its band, last compaction, the
        wrap-up checklist (files, pending patches, last key command and test conclusion, open questions, suggested
        next action), the handoff package status, and `open_master_actions` (ids to ack or complete). Read it
        before requesting a handoff or consuming a package."""
        return await answer(context, "GET", f"/api/v1/threads/{segment(thread_id)}/context-budget")

    @server.tool()
    async def list_alerts(
        context: Context,
        project_id: Annotated[Id | None, Field(description="Only this project's alerts.")] = None,
        thread_id: Annotated[Id | None, Field(description="Only this thread's alerts.")] = None,
        status: Annotated[AlertStatus | None, Field(description="opened, acked or resolved.")] = None,
    ) -> CallToolResult:
        """Context alerts (watch / urgent / critical, compaction risk, handoff missing), each in its latest status,
        newest first. Opened ones ask for your attention; ack them with ack_alert once handled."""
        params = {"project_id": project_id, "thread_id": thread_id, "status": status}
        return await answer(context, "GET", "/api/v1/alerts", params=params)

    @server.tool()
    async def ack_alert(
        alert_id: Annotated[Id, Field(description="From list_alerts.")], context: Context
    ) -> CallToolResult:
        """Acknowledge an alert: you have seen it and are acting on it (repeats change nothing)."""
        return await answer(context, "POST", f"/api/v1/alerts/{segment(alert_id)}/ack")

    @server.tool()
    async def open_actions(
        context: Context,
        project_id: Annotated[Id | None, Field(description="Only this project's actions.")] = None,
        thread_id: Annotated[Id | None, Field(description="Only this thread's actions.")] = None,
        state: Annotated[
            MasterActionState | None,
            Field(description="Only actions in this state; by default the open ones (issued or acknowledged)."),
        ] = None,
    ) -> CallToolResult:
        """The master actions the engine issued (prepare_handoff, pre_compaction_wrap_up, finish_atomic_subtask,
        precreate_relay_thread, avoid_large_context_append, forbid_context_growth, compact_now...), each once in its
        latest state, newest first. A prepare_handoff clears by itself when the thread's package for this cycle
        is ready."""
        params = {"project_id": project_id, "thread_id": thread_id}
        params |= {"state": state} if state is not None else {"open": "true"}
        return await answer(context, "GET", "/api/v1/master-actions", params=params)

    @server.tool()
    async def ack_action(
        action_id: Annotated[Id, Field(description="From open_actions or thread_budget.")], context: Context
    ) -> CallToolResult:
        """Acknowledge an action: seen, being worked on (issued -> acknowledged). A finished one answers 409."""
        return await answer(context, "POST", f"/api/v1/master-actions/{segment(action_id)}/ack")

    @server.tool()
    async def complete_action(
        action_id: Annotated[Id, Field(description="From open_actions or thread_budget.")], context: Context
    ) -> CallToolResult:
        """Mark an action done (issued or acknowledged -> done). A finished one answers 409."""
        return await answer(context, "POST", f"/api/v1/master-actions/{segment(action_id)}/done")

    @server.tool()
    async def request_handoff(
        thread_id: Annotated[Id, Field(description="The thread that should hand off.")],
        context: Context,
        reason: Annotated[
            str | None, Field(max_length=MAX_SHORT_TEXT_LENGTH, description="Why, for the worker and the log.")
        ] = None,
    ) -> CallToolResult:
        """Ask a thread to prepare its handoff package now: a prepare_handoff action for its current cycle, which
        clears when a ready package arrives. Use it for urgent and critical threads without a ready package,
        critical first. The answer names the action id."""
        body = {"reason": reason} if reason else {}
        return await answer(context, "POST", f"/api/v1/threads/{segment(thread_id)}/handoff-requests", body=body)

    @server.tool()
    async def thread_handoff_packages(
        thread_id: Annotated[Id, Field(description="The thread, as the one handing off or the one receiving.")],
        context: Context,
    ) -> CallToolResult:
        """The handoff packages a thread handed off or received, newest first, with their status (draft, ready,
        consumed, expired)."""
        return await answer(context, "GET", f"/api/v1/threads/{segment(thread_id)}/handoff-packages")

    @server.tool()
    async def read_handoff_package(
        package_id: Annotated[Id, Field(description="A handoff_package_id.")], context: Context
    ) -> CallToolResult:
        """The whole package (spec 3.3): goal, summary, done and pending work, critical files, commands and
        artifacts, decisions, open questions, next action. Read it before consuming it into a relay thread."""
        return await answer(context, "GET", f"/api/v1/handoff-packages/{segment(package_id)}")

    @server.tool()
    async def consume_handoff_package(
        package_id: Annotated[Id, Field(description="A ready package.")],
        to_thread_id: Annotated[Id, Field(description="The relay thread that continues the work.")],
        context: Context,
    ) -> CallToolResult:
        """Hand a ready package to the relay thread that continues the work; the package becomes consumed, once:
        only a ready package can be consumed, and once one thread took it another is refused (409 naming it);
        consuming it again into the same thread repeats the answer (the same consumed_at). Roles: user, operator
        (within their projects), or the worker reporting the package's thread."""
        path = f"/api/v1/handoff-packages/{segment(package_id)}/consume"
        return await answer(context, "POST", path, body={"to_thread_id": to_thread_id})

    @server.tool()
    async def request_compaction(
        thread_id: Annotated[Id, Field(description="The thread to compact.")], context: Context
    ) -> CallToolResult:
        """Ask for a manual compaction of a thread now (a compact_now action). Only once its handoff package is
        ready or its work is saved: a compaction without one loses what the context held."""
        return await answer(context, "POST", f"/api/v1/threads/{segment(thread_id)}/compaction-requests")

    @server.tool()
    async def relay_schedule(
        project_id: Annotated[Id, Field(description="A project id from list_projects.")], context: Context
    ) -> CallToolResult:
        """Which of a project's threads to relay now (issue 37): relays are capped per worker node and per project
        (`limits`; `running` and `node_relays` count those under way). Each thread requiring a handoff, most pressing
        first (spec 8.1), has a verdict with its reason: `start` (request its handoff now), `queued` (wait,
        `queue_position` says its turn) or `futile` (do not relay: its relay started above the watch threshold's
        use, or the same work was relayed moments ago; tell the user instead). `new_subtask` names the thread a new
        subtask should go to, or null for a fresh thread, and why (spec 8.2.4). Roles: user, operator (within their
        projects)."""
        return await answer(context, "GET", f"/api/v1/projects/{segment(project_id)}/relay-schedule")

    async def resource(context: Context, path: str) -> str:
        try:
            return orjson.dumps(await rest.call(context.headers, "GET", path)).decode()
        except ApiRefused as refused:
            if refused.status == 404:
                raise ResourceNotFoundError(refused.detail) from refused
            raise ResourceError(str(refused)) from refused

    @server.resource(PROJECT_URI, name="project", mime_type="application/json")
    async def project(project_id: str, context: Context) -> str:
        """A project's ranked threads, next risk, threads requiring handoff and new-subtask threads (spec 6.2)."""
        return await resource(context, f"/api/v1/projects/{segment(project_id)}")

    @server.resource(THREAD_URI, name="thread", mime_type="application/json")
    async def thread(thread_id: str, context: Context) -> str:
        """A thread's budget, checklist, package status and open actions (spec 6.3)."""
        return await resource(context, f"/api/v1/threads/{segment(thread_id)}/context-budget")

    return server
