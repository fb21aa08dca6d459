"""The routing fold [thread_id]: sends each thread state to its project, and its ring values to the conversations
that show it.

It sits beside the engine's `thread-state` topic (same key), so it knows each thread's last project and the
conversations linked to it. That makes two things order-free: a thread that moves project gets a `ThreadLeft` sent
to the old one, and a conversation registered after its thread still gets the thread's values (sent on the link).
Conversations get values only when what their ring shows changes, not on every snapshot.
"""

from __future__ import annotations

from schemas import ThreadState
from schemas.projects import MAX_LINKED_CONVERSATIONS, ConversationLink, ShownThread, ThreadLeft, ThreadRoutes
from streams.projects.outputs import CONVERSATION_THREADS, THREAD_STATE_BY_PROJECT, Change, ConversationThread, Emit
from streams.projects.summary import ring_percent

UNCHANGED: Change[ThreadRoutes] = Change(None)


def route_thread_state(routes: ThreadRoutes | None, thread: ThreadState) -> Change[ThreadRoutes]:
    held = routes.shown if routes else None
    if held is not None and thread.updated_at < held.updated_at:
        return UNCHANGED  # a replayed older state
    shown = shown_thread(thread)
    emits = [Emit(THREAD_STATE_BY_PROJECT, thread.project_id, thread)]
    if held is not None and held.project_id != shown.project_id:
        left = ThreadLeft(thread_id=thread.thread_id, project_id=held.project_id, left_at=thread.updated_at)
        emits.append(Emit(THREAD_STATE_BY_PROJECT, held.project_id, left))
    elif held is not None and ring_values(held) == ring_values(shown):
        return Change(None, emits)
    linked = routes.conversation_ids if routes else []
    emits += [_to_conversation(conversation_id, shown) for conversation_id in linked]
    return Change(ThreadRoutes(thread_id=thread.thread_id, shown=shown, conversation_ids=linked), emits)


def apply_link(routes: ThreadRoutes | None, link: ConversationLink) -> Change[ThreadRoutes]:
    """A conversation starts or stops showing the thread; a new link gets the thread's values at once."""
    routes = routes or ThreadRoutes(thread_id=link.thread_id)
    others = [c for c in routes.conversation_ids if c != link.conversation_id]
    if not link.linked:
        if len(others) == len(routes.conversation_ids):
            return UNCHANGED
        return Change(routes.model_copy(update={"conversation_ids": others}))
    linked = [*others[-(MAX_LINKED_CONVERSATIONS - 1) :], link.conversation_id]  # the oldest link yields
    shown = routes.shown
    return Change(
        routes.model_copy(update={"conversation_ids": linked}),
        [_to_conversation(link.conversation_id, shown)] if shown is not None else [],
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


def _to_conversation(conversation_id: str, shown: ShownThread) -> Emit:
    return Emit(CONVERSATION_THREADS, conversation_id, ConversationThread(conversation_id=conversation_id, shown=shown))
