"""ClickHouse rows back into the contract's read models (spec 6.1-6.3): the stored values, never recomputed."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from api.cursor import SortKey
from api.reads import action_items
from api.views import THREAD_DETAIL_FROM_REPORT, THREAD_DETAIL_FROM_STATE, ThreadContextDetail
from schemas import CompactionFinished, ContextBudgetIndicator, ConversationItem, ProjectDetail
from sinks.queries import Row


def conversation_item(row: Row) -> ConversationItem:
    visible = row["indicator_visible"]
    return ConversationItem(
        conversation_id=row["conversation_id"],
        conversation_type=row["conversation_type"],
        project_id=row["project_id"],
        project_title=row["project_title"],
        manual_pinned=row["manual_pinned"],
        latest_reply_at=row["latest_reply_at"],
        context_budget_indicator=ContextBudgetIndicator(
            visible=visible,
            percent=row["indicator_percent"] if visible else None,
            level=row["indicator_level"] if visible else None,
            stale=row["indicator_stale"] if visible else False,
        ),
        context_budget_source_node_id=row["context_budget_source_node_id"],
        context_budget_updated_at=row["context_budget_updated_at"],
        must_finish_before_compaction=row["must_finish_before_compaction"],
    )


def sort_key(row: Row) -> SortKey:
    return SortKey(row["pin_rank"], row["reply_rank"], row["conversation_id"])


def project_detail(row: Row) -> ProjectDetail:
    """The stored view; `active_thread_contexts` is kept as the JSON the ranking produced."""
    body = {
        "project_id": row["project_id"],
        "active_thread_contexts": orjson.Fragment(row["active_thread_contexts"] or "[]"),
        "next_compaction_risk_thread_id": row["next_compaction_risk_thread_id"],
        "threads_requiring_handoff": row["threads_requiring_handoff"],
        "master_context_strategy_summary": row["master_context_strategy_summary"],
        "new_subtask_thread_ids": row.get("new_subtask_thread_ids") or [],
    }
    return ProjectDetail.model_validate_json(orjson.dumps(body))


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
