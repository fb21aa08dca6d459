"""The routing [thread_id]: sends what a project view uses of each thread to its project, and its ring values to the
conversations that show it.

It runs in the engine's fold (same key: `streams.engine.routing`), over the thread states the engine publishes, so it
knows each thread's last project and the conversations linked to it. That makes two things order-free: a thread that
moves project gets a `ThreadLeft` sent to the old one, and a conversation registered after its thread still gets the
thread's values (sent on the link).

Neither hop carries every snapshot. Conversations get values when what their ring shows changes; the project gets
them when what its view shows or ranks by changes (`project_values`), and at least every `refresh_after` while the
thread reports, so that a busy thread whose values hold still is not retired. The project view therefore shows each
thread's exact percent and times as of its last forward.
"""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import HandoffPackage, PackageStatus, ThreadState
from schemas.copies import replaced
from schemas.projects import (
    MAX_LINKED_CONVERSATIONS,
    ConversationLink,
    ConversationRelay,
    LiveThread,
    ShownThread,
    TaskImportance,
    ThreadInProject,
    ThreadLeft,
    ThreadRoutes,
)
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import CONVERSATION_THREADS, THREAD_STATE_BY_PROJECT, Change, ConversationThread, Emit
from streams.aggregates.resolution import ring_percent, seen_values
from streams.aggregates.risk import live_thread

UNCHANGED: Change[ThreadRoutes] = Change(None)

RoutingInput = ThreadState | ConversationLink | TaskImportance | HandoffPackage


def route(routes: ThreadRoutes | None, record: RoutingInput, config: ProjectsConfig) -> Change[ThreadRoutes]:
    """One record of the thread into its routes."""
    if isinstance(record, ConversationLink):
        return apply_link(routes, record)
    if isinstance(record, HandoffPackage):
        return relay_conversations(routes, record)
    if isinstance(record, TaskImportance):
        return apply_importance(routes, record)
    return route_thread_state(routes, record, config)


def route_thread_state(
    routes: ThreadRoutes | None, thread: ThreadState, config: ProjectsConfig
) -> Change[ThreadRoutes]:
    routes = routes or ThreadRoutes(thread_id=thread.thread_id)
    if thread.updated_at < _latest(routes):
        return UNCHANGED  # a replayed older state
    update: dict[str, object] = {}
    emits: list[Emit] = []
    held, shown = routes.shown, shown_thread(thread)
    if held is not None and held.project_id != shown.project_id:
        left = ThreadLeft(thread_id=thread.thread_id, project_id=held.project_id, left_at=thread.updated_at)
        emits.append(Emit(THREAD_STATE_BY_PROJECT, held.project_id, left))
    importance = routes.importance.task_importance if routes.importance else None
    live = ThreadInProject(project_id=thread.project_id, thread=live_thread(thread, importance))
    if _forward_due(routes.forwarded, live, config):
        update["forwarded"] = live
        emits.append(Emit(THREAD_STATE_BY_PROJECT, thread.project_id, live))
    if held is None or held.project_id != shown.project_id or ring_values(held) != ring_values(shown):
        update["shown"] = shown
        emits += [_to_conversation(conversation_id, shown) for conversation_id in routes.conversation_ids]
    return Change(replaced(routes, update) if update else None, emits)


def apply_link(routes: ThreadRoutes | None, link: ConversationLink) -> Change[ThreadRoutes]:
    """A conversation starts or stops showing the thread; a new link gets the thread's values at once."""
    routes = routes or ThreadRoutes(thread_id=link.thread_id)
    others = [c for c in routes.conversation_ids if c != link.conversation_id]
    if not link.linked:
        if len(others) == len(routes.conversation_ids):
            return UNCHANGED
        return Change(replaced(routes, {"conversation_ids": others}))
    linked = [*others[-(MAX_LINKED_CONVERSATIONS - 1) :], link.conversation_id]  # the oldest link yields
    shown = routes.shown
    return Change(
        replaced(routes, {"conversation_ids": linked}),
        [_to_conversation(link.conversation_id, shown)] if shown is not None else [],
    )


def apply_importance(routes: ThreadRoutes | None, importance: TaskImportance) -> Change[ThreadRoutes]:
    """The thread's task importance was set: kept for its next forwards, and its project re-ranks it at once with
    the values last forwarded (an importance set before the thread's first state waits for that state)."""
    routes = routes or ThreadRoutes(thread_id=importance.thread_id)
    held = routes.importance
    if held is not None and (importance.set_at, importance.task_importance) <= (held.set_at, held.task_importance):
        return UNCHANGED  # a replay, or older than the importance in force
    update: dict[str, object] = {"importance": importance}
    emits: list[Emit] = []
    forwarded = routes.forwarded
    if forwarded is not None and forwarded.thread.task_importance != importance.task_importance:
        thread = replaced(forwarded.thread, {"task_importance": importance.task_importance})
        update["forwarded"] = replaced(forwarded, {"thread": thread})
        emits.append(Emit(THREAD_STATE_BY_PROJECT, forwarded.project_id, update["forwarded"]))
    return Change(replaced(routes, update), emits)


def relay_conversations(routes: ThreadRoutes | None, package: HandoffPackage) -> Change[ThreadRoutes]:
    """A package of the thread was consumed into a relay thread: each conversation showing the thread hears of it,
    and a master conversation moves to the relay (spec 7.3, `indicators.apply_relay`). Other versions change
    nothing here; a replayed consume repeats the relay, which the indicator fold then finds already applied."""
    if routes is None or package.package_status is not PackageStatus.CONSUMED or package.to_thread_id is None:
        return UNCHANGED
    relayed_at = package.consumed_at or package.created_at
    return Change(
        None,
        [
            Emit(
                CONVERSATION_THREADS,
                conversation_id,
                ConversationRelay(
                    conversation_id=conversation_id,
                    from_thread_id=package.from_thread_id,
                    to_thread_id=package.to_thread_id,
                    relayed_at=relayed_at,
                ),
            )
            for conversation_id in routes.conversation_ids
        ],
    )


def shown_thread(thread: ThreadState) -> ShownThread:
    return ShownThread(
        thread_id=thread.thread_id,
        project_id=thread.project_id,
        node_id=thread.node_id,
        context_budget_remaining_pct=thread.context_budget_remaining_pct,
        context_budget_level=thread.context_budget_level,
        must_finish_before_compaction=thread.must_finish_before_compaction,
        stale=thread.stale,
        updated_at=thread.updated_at,
    )


def ring_values(shown: ShownThread) -> tuple[object, ...]:
    """What a conversation item shows of its thread (spec 6.1)."""
    return (
        shown.node_id,
        ring_percent(shown.context_budget_remaining_pct),
        shown.context_budget_level,
        shown.must_finish_before_compaction,
        shown.stale,
    )


def project_values(thread: LiveThread) -> tuple[object, ...]:
    """What a project's view and ranking use of a thread, at the resolution they use it."""
    return (seen_values(thread.summary), thread.active_facts, thread.requires_handoff, thread.task_importance)


def _forward_due(forwarded: ThreadInProject | None, live: ThreadInProject, config: ProjectsConfig) -> bool:
    if forwarded is None or forwarded.project_id != live.project_id:
        return True
    if project_values(forwarded.thread) != project_values(live.thread):
        return True
    return live.thread.summary.updated_at - forwarded.thread.summary.updated_at >= config.refresh_after


def _latest(routes: ThreadRoutes) -> datetime:
    """`updated_at` of the newest thread state this fold acted on."""
    times = [routes.shown.updated_at] if routes.shown else []
    times += [routes.forwarded.thread.summary.updated_at] if routes.forwarded else []
    return max(times, default=datetime.min.replace(tzinfo=UTC))


def _to_conversation(conversation_id: str, shown: ShownThread) -> Emit:
    return Emit(CONVERSATION_THREADS, conversation_id, ConversationThread(conversation_id=conversation_id, shown=shown))
