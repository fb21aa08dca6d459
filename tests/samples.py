"""Valid sample records shared by the tests, taken from the spec's own examples where it has them."""

from __future__ import annotations

import json
from typing import Any

# Spec 004 section 5.2, request body, verbatim.
SPEC_REPORT_REQUEST: dict[str, Any] = {
    "node_id": "mac-01",
    "worker_id": "worker-mac-01",
    "thread_id": "thread-abc",
    "project_id": "proj-001",
    "task_id": "task-017",
    "source_kind": "worker_estimator",
    "context_budget_remaining_pct": 37,
    "context_budget_level": "urgent",
    "compaction_expected_at": "2026-03-25T16:08:30+08:00",
    "must_finish_before_compaction": True,
    "estimated_remaining_turns": 5,
    "estimated_remaining_large_messages": 2,
    "last_compaction_at": "2026-03-25T15:12:10+08:00",
    "compaction_count": 1,
    "captured_at": "2026-03-25T15:56:00+08:00",
}

# Spec 004 section 5.2, response body, verbatim.
SPEC_REPORT_RESPONSE: dict[str, Any] = {
    "accepted": True,
    "thread_id": "thread-abc",
    "context_budget_level": "urgent",
    "next_required_report_in_seconds": 5,
    "master_actions": ["prepare_handoff", "avoid_large_context_append"],
}

# Spec 004 section 6.1, conversation item, verbatim (plus project_id, which every item carries).
SPEC_CONVERSATION_ITEM: dict[str, Any] = {
    "conversation_id": "conv-proj-001",
    "conversation_type": "single_device",
    "project_id": "proj-001",
    "project_title": "北区试产线回归",
    "manual_pinned": True,
    "latest_reply_at": "2026-03-25T09:26:00+08:00",
    "context_budget_indicator": {"visible": True, "style": "ring_percent", "percent": 52, "level": "watch"},
    "must_finish_before_compaction": False,
}

SNAPSHOT: dict[str, Any] = {**SPEC_REPORT_REQUEST, "snapshot_id": "snap-1", "snapshot_version": 7}

HANDOFF_READY: dict[str, Any] = {
    "handoff_package_id": "hp-1",
    "project_id": "proj-001",
    "task_id": "task-017",
    "from_thread_id": "thread-abc",
    "to_thread_id": None,
    "package_status": "ready",
    "summary_text": "Regression of line B: fixture patch applied, two tests still red.",
    "open_questions": ["Is the torque limit 12 or 14 Nm?"],
    "critical_files": ["fixtures/line_b.py"],
    "critical_commands": ["pytest tests/line_b -k torque"],
    "critical_tests": ["tests/line_b/test_torque.py::test_limit"],
    "critical_artifacts": ["logs/line_b_run_17.txt"],
    "decision_links": ["memory://proj-001/decisions/42"],
    "created_at": "2026-03-25T15:50:00+08:00",
    "ready_at": "2026-03-25T15:58:00+08:00",
    "consumed_at": None,
}

EVENT_BASE: dict[str, Any] = {"thread_id": "thread-abc", "occurred_at": "2026-03-25T15:56:00+08:00"}

SESSION_EVENTS: list[dict[str, Any]] = [
    {**EVENT_BASE, "event_id": "e1", "type": "usage_sample", "input_tokens": 4227, "model": "gpt-5-codex"},
    {
        **EVENT_BASE,
        "event_id": "e2",
        "type": "message_added",
        "role": "user",
        "text": "继续跑回归 and fix the torque test",
    },
    {
        **EVENT_BASE,
        "event_id": "e3",
        "type": "tool_result_added",
        "tool_name": "read_file",
        "token_count": 1800,
        "truncated": True,
    },
    {
        **EVENT_BASE,
        "event_id": "e4",
        "type": "context_manifest",
        "memory_ids": ["m-3", "m-9"],
        "estimated_window_tokens": 258400,
        "sections": [
            {"key": "system", "label": "System prompt", "tokens": 18},
            {"key": "messages", "label": "Messages", "tokens": 4365, "count": 31},
        ],
    },
    {**EVENT_BASE, "event_id": "e5", "type": "compaction_started", "trigger_mode": "manual", "tokens_before": 4383},
    {
        **EVENT_BASE,
        "event_id": "e6",
        "type": "compaction_summary",
        "trigger_mode": "manual",
        "summary_text": "## 会话任务交接\n- patched fixture",
        "replaced_through_event_id": "e3",
    },
    {
        **EVENT_BASE,
        "event_id": "e7",
        "type": "compaction_completed",
        "trigger_mode": "manual",
        "tokens_before": 4383,
        "tokens_after": 304,
    },
    {**EVENT_BASE, "event_id": "e8", "type": "compact_requested", "requested_by": "user-kris"},
    {**EVENT_BASE, "event_id": "e9", "type": "memory_injection_changed", "enabled": False},
    {
        **EVENT_BASE,
        "event_id": "e10",
        "type": "work_fact_changed",
        "fact": "uncommitted_patch",
        "active": True,
        "files": ["fixtures/line_b.py"],
    },
    {
        **EVENT_BASE,
        "event_id": "e11",
        "type": "thread_worker_moved",
        "from_worker_id": "worker-mac-01",
        "to_worker_id": "worker-mac-02",
        "moved_by": "ops-ana",
        "reason": "worker-mac-01 was retired",
    },
]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()
