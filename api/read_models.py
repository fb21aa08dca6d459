"""ClickHouse rows back into the contract's read models (spec 6.1-6.3): the stored values, never recomputed."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from api.cursor import SortKey
from api.reads import action_items
from api.views import (
    THREAD_DETAIL_FROM_REPORT,
    THREAD_DETAIL_FROM_STATE,
    ProjectContextView,
    ProjectThreadContext,
    ThreadContextDetail,
)
from schemas import CompactionFinished, ContextBudgetIndicator, ConversationItem, ProjectDetail
from sinks.queries import Row
from sinks.tables import CONVERSATION_INDICATORS, PROJECT_CONTEXT_RISK

CONVERSATION_ITEM_COPIED = CONVERSATION_INDICATORS.kept_as_is(ConversationItem)
"""What a conversation row gives back as stored; the indicator is rebuilt from its flattened `indicator_` columns."""
PROJECT_DETAIL_COPIED = PROJECT_CONTEXT_RISK.kept_as_is(ProjectDetail)
"""What a project row gives back as stored; `active_thread_contexts` is kept as the JSON the ranking produced."""


def conversation_item(row: Row) -> ConversationItem:
    visible = row["indicator_visible"]
    indicator = ContextBudgetIndicator(
        visible=visible,
        percent=row["indicator_percent"] if visible else None,
        level=row["indicator_level"] if visible else None,
        stale=row["indicator_stale"] if visible else False,
    )
    return ConversationItem(
        **{name: row[name] for name in CONVERSATION_ITEM_COPIED}, context_budget_indicator=indicator
    )


def sort_key(row: Row) -> SortKey:
    return SortKey(row["pin_rank"], row["reply_rank"], row["conversation_id"])


def project_detail(row: Row) -> ProjectDetail:
    body = {name: row[name] for name in PROJECT_DETAIL_COPIED}
    body["active_thread_contexts"] = orjson.Fragment(row["active_thread_contexts"] or "[]")
    return ProjectDetail.model_validate_json(orjson.dumps(body))


def project_view(detail: ProjectDetail, tools: dict[str, Row]) -> ProjectContextView:
    """The project's view with each thread's agent tool, name, model and shown percent, from `tools` (by thread):
    the engine's view knows the budget only."""
    shown = {thread_id: {name: row[name] for name in THREAD_DETAIL_FROM_REPORT} for thread_id, row in tools.items()}
    threads = [
        ProjectThreadContext(**thread.model_dump(), **shown.get(thread.thread_id, {}))
        for thread in detail.active_thread_contexts
    ]
    return ProjectContextView(**{**detail.model_dump(), "active_thread_contexts": threads})


def thread_detail(
    row: Row, checklist_json: str | None, compaction_count: int, recent: Sequence[Row], tool: Row | None = None
) -> ThreadContextDetail:
    """Spec 6.3 from the thread's latest row, its current checklist (the engine's) and its compaction history; with
    what its latest snapshot said of the agent tool (`tool`), when there is one."""
    body = {name: row[name] for name in THREAD_DETAIL_FROM_STATE}
    body |= {name: tool[name] for name in THREAD_DETAIL_FROM_REPORT} if tool else {}
    items = action_items(row.get("master_action_items") or "[]")
    body["pending_master_actions"] = [item.action for item in items if item.open]
    body["open_master_actions"] = [item.model_dump(mode="json") for item in items if item.open]
    if checklist_json:
        body["wrap_up_checklist"] = orjson.Fragment(checklist_json)
    if row.get("latest_manifest"):
        body["latest_context_manifest"] = orjson.Fragment(row["latest_manifest"])
    body["compaction_history"] = {
        "compaction_count": compaction_count,
        "recent": [{name: item[name] for name in CompactionFinished.model_fields if name in item} for item in recent],
    }
    return ThreadContextDetail.model_validate_json(orjson.dumps(body))
