"""The conversation indicator fold [conversation_id]: the home-list ring marker (spec 6.1, 7.1-7.3).

single_device shows its thread's budget, master_agent its main thread's (7.3); group shows none (7.2: several
threads are not squeezed into one value). A stale thread keeps its last value, marked stale. The item is published
when anything it shows changes; the `conversation.context_indicator.updated` event only when the ring itself does
(visible, integer percent, level, staleness).

Inputs come in any order: the registry entry from `conversations`, the thread's values from the routing fold, which
sends them when the thread changes and when this fold links a conversation to it (see `routes`).

The event carries the time its values were last set (the registry entry's or the thread's), never the clock of the
worker applying it, so a replay publishes the same records.
"""

from __future__ import annotations

from datetime import datetime

from schemas import (
    ContextBudgetIndicator,
    Conversation,
    ConversationContextIndicatorUpdated,
    ConversationItem,
    ConversationType,
)
from schemas.copies import replaced
from schemas.projects import ConversationIndicatorState, ConversationLink, ConversationRelay, ShownThread
from streams.aggregates.outputs import (
    CLIENT_EVENTS,
    CONVERSATION_INDICATORS,
    CONVERSATION_LINKS,
    CONVERSATIONS,
    Change,
    Emit,
    stable_id,
)
from streams.aggregates.resolution import ring_percent

NEWS_FIELDS = tuple(name for name in ConversationItem.model_fields if name != "context_budget_updated_at")
UNCHANGED: Change[ConversationIndicatorState] = Change(None)
HIDDEN = ContextBudgetIndicator(visible=False)


def apply_conversation(
    state: ConversationIndicatorState | None, conversation: Conversation
) -> Change[ConversationIndicatorState]:
    """A registry entry, new or changed: (un)link its shown thread when that changes, then republish if needed."""
    state = state or ConversationIndicatorState()
    previous = state.conversation
    if previous is not None and conversation.updated_at < previous.updated_at:
        return UNCHANGED  # a replayed older entry
    before, after = shown_thread_id(previous), shown_thread_id(conversation)
    links = []
    if before != after:
        links += [_link(conversation, before, linked=False)] if before else []
        links += [_link(conversation, after, linked=True)] if after else []
    # values of a thread the conversation no longer shows must not stay on its ring
    shown = state.shown if state.shown is not None and state.shown.thread_id == after else None
    updated = replaced(state, {"conversation": conversation, "shown": shown})
    cause = stable_id(conversation.conversation_id, conversation.updated_at.isoformat())
    return _republish(updated, conversation, cause, links)


def apply_shown_thread(
    state: ConversationIndicatorState | None, shown: ShownThread
) -> Change[ConversationIndicatorState]:
    """New values of a thread, from the routing fold."""
    if state is None or state.conversation is None or shown_thread_id(state.conversation) != shown.thread_id:
        return UNCHANGED  # sent before an unlink took effect
    if state.shown is not None and shown.updated_at < state.shown.updated_at:
        return UNCHANGED
    conversation_id = state.conversation.conversation_id
    cause = stable_id(conversation_id, shown.thread_id, shown.updated_at.isoformat())
    return _republish(replaced(state, {"shown": shown}), state.conversation, cause, [])


def apply_relay(
    state: ConversationIndicatorState | None, relay: ConversationRelay
) -> Change[ConversationIndicatorState]:
    """The main thread of a master conversation handed its work to a relay thread: the conversation now shows the
    relay (spec 7.3). The moved entry goes back onto the `conversations` registry, so the registry says what the ring
    shows; reading it back changes nothing. Other conversation types keep their thread."""
    conversation = state.conversation if state is not None else None
    if (
        state is None
        or conversation is None
        or conversation.conversation_type is not ConversationType.MASTER_AGENT
        or shown_thread_id(conversation) != relay.from_thread_id
    ):
        return UNCHANGED
    moved = replaced(
        conversation, {"thread_ids": [relay.to_thread_id], "updated_at": max(relay.relayed_at, conversation.updated_at)}
    )
    change = apply_conversation(state, moved)
    return Change(change.state, [*change.emits, Emit(CONVERSATIONS, moved.conversation_id, moved)])


def shown_thread_id(conversation: Conversation | None) -> str | None:
    """The thread whose budget the ring shows: none for a group (spec 7.2)."""
    if conversation is None or conversation.conversation_type is ConversationType.GROUP:
        return None
    return conversation.thread_ids[0] if conversation.thread_ids else None


def indicator(shown: ShownThread | None) -> ContextBudgetIndicator:
    if shown is None:
        return HIDDEN
    return ContextBudgetIndicator(
        visible=True,
        percent=ring_percent(shown.context_budget_remaining_pct),
        level=shown.context_budget_level,
        stale=shown.stale,
    )


def conversation_item(conversation: Conversation, shown: ShownThread | None) -> ConversationItem:
    return ConversationItem(
        conversation_id=conversation.conversation_id,
        conversation_type=conversation.conversation_type,
        project_id=conversation.project_id,
        project_title=conversation.project_title,
        manual_pinned=conversation.manual_pinned,
        latest_reply_at=conversation.latest_reply_at,
        context_budget_indicator=indicator(shown),
        context_budget_source_node_id=shown.node_id if shown else None,
        context_budget_updated_at=shown.updated_at if shown else None,
        must_finish_before_compaction=shown.must_finish_before_compaction if shown else False,
    )


def _republish(
    state: ConversationIndicatorState, conversation: Conversation, cause: str, emits: list[Emit]
) -> Change[ConversationIndicatorState]:
    item = conversation_item(conversation, state.shown)
    published = state.published
    if published is not None and _news(item) == _news(published):
        return Change(state, emits)
    emits = [*emits, Emit(CONVERSATION_INDICATORS, item.conversation_id, item)]
    before = published.context_budget_indicator if published is not None else HIDDEN
    if item.context_budget_indicator != before:
        emits.append(
            Emit(
                CLIENT_EVENTS,
                item.project_id,
                ConversationContextIndicatorUpdated(
                    event_id=stable_id(cause, "indicator"),
                    occurred_at=_values_set_at(conversation, state.shown),
                    project_id=item.project_id,
                    conversation_id=item.conversation_id,
                    context_budget_indicator=item.context_budget_indicator,
                    context_budget_source_node_id=item.context_budget_source_node_id,
                    context_budget_updated_at=item.context_budget_updated_at,
                    must_finish_before_compaction=item.must_finish_before_compaction,
                ),
            )
        )
    return Change(replaced(state, {"published": item}), emits)


def _values_set_at(conversation: Conversation, shown: ShownThread | None) -> datetime:
    """When what the item shows was last set: the later of its registry entry's time and its thread's."""
    return conversation.updated_at if shown is None else max(conversation.updated_at, shown.updated_at)


def _news(item: ConversationItem) -> tuple[object, ...]:
    """The item's fields but the time: that alone changing is not news (the item says when its values were last
    set, not last confirmed)."""
    return tuple(getattr(item, name) for name in NEWS_FIELDS)


def _link(conversation: Conversation, thread_id: str, *, linked: bool) -> Emit:
    link = ConversationLink(conversation_id=conversation.conversation_id, thread_id=thread_id, linked=linked)
    return Emit(CONVERSATION_LINKS, thread_id, link)
