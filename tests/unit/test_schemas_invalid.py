"""Bad input is rejected with a reason a dead-letter consumer can group by and a message naming the failing field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from schemas import (
    SESSION_EVENT_ADAPTER,
    Codec,
    ContextBudgetIndicator,
    Conversation,
    DecodeError,
    HandoffPackage,
    ThreadContextSnapshot,
    ThresholdPolicy,
)
from schemas.base import MAX_ID_LENGTH, MAX_SURFACE_TEXT_LENGTH
from tests.samples import HANDOFF_READY, SESSION_EVENTS, SNAPSHOT, dumps


def snapshot_with(**changes: Any) -> bytes:
    record = copy.deepcopy(SNAPSHOT)
    for key, value in changes.items():
        if value is _DROP:
            record.pop(key)
        else:
            record[key] = value
    return dumps(record)


_DROP = object()

# (case id, bytes, expected reason, a fragment the detail must contain)
SNAPSHOT_CASES: list[tuple[str, bytes, str, str]] = [
    (
        "pct_as_string",
        snapshot_with(context_budget_remaining_pct="37"),
        "validation_error",
        "context_budget_remaining_pct",
    ),
    (
        "pct_over_100",
        snapshot_with(context_budget_remaining_pct=100.5),
        "validation_error",
        "less than or equal to 100",
    ),
    (
        "pct_negative",
        snapshot_with(context_budget_remaining_pct=-0.1),
        "validation_error",
        "greater than or equal to 0",
    ),
    (
        "pct_nan",
        snapshot_with().replace(b'"context_budget_remaining_pct": 37', b'"context_budget_remaining_pct": NaN'),
        "validation_error",
        "context_budget_remaining_pct",
    ),
    (
        "pct_as_bool",
        snapshot_with(context_budget_remaining_pct=True),
        "validation_error",
        "context_budget_remaining_pct",
    ),
    ("naive_timestamp", snapshot_with(captured_at="2026-03-25T15:56:00"), "validation_error", "timezone"),
    ("timestamp_as_number", snapshot_with(captured_at=1774425360), "validation_error", "captured_at"),
    ("timestamp_not_a_date", snapshot_with(captured_at="yesterday"), "validation_error", "captured_at"),
    (
        "unknown_level",
        snapshot_with(context_budget_level="danger"),
        "validation_error",
        "'safe', 'watch', 'urgent' or 'critical'",
    ),
    ("level_wrong_case", snapshot_with(context_budget_level="URGENT"), "validation_error", "context_budget_level"),
    ("unknown_source_kind", snapshot_with(source_kind="claude_cli"), "validation_error", "source_kind"),
    ("missing_thread_id", snapshot_with(thread_id=_DROP), "validation_error", "thread_id: Field required"),
    ("empty_thread_id", snapshot_with(thread_id=""), "validation_error", "thread_id"),
    ("id_with_whitespace", snapshot_with(project_id="proj 001"), "validation_error", "project_id"),
    ("id_too_long", snapshot_with(thread_id="t" * (MAX_ID_LENGTH + 1)), "validation_error", "at most 128"),
    # An id no route can reach (`/`) or that prints as another (controls, bidirectional overrides).
    ("id_with_slash", snapshot_with(thread_id="a/b"), "validation_error", "thread_id"),
    ("id_with_nul", snapshot_with(thread_id="a\x00b"), "validation_error", "thread_id"),
    ("id_with_unit_separator", snapshot_with(worker_id="w\x1f"), "validation_error", "worker_id"),
    ("id_with_del", snapshot_with(node_id="n\x7f"), "validation_error", "node_id"),
    ("id_with_rtl_override", snapshot_with(thread_id="thread-\u202eabc"), "validation_error", "thread_id"),
    ("id_with_isolate", snapshot_with(project_id="p\u2066"), "validation_error", "project_id"),
    ("null_required_field", snapshot_with(captured_at=None), "validation_error", "captured_at"),
    (
        "bool_as_string",
        snapshot_with(must_finish_before_compaction="true"),
        "validation_error",
        "must_finish_before_compaction",
    ),
    ("negative_count", snapshot_with(compaction_count=-1), "validation_error", "compaction_count"),
    ("fractional_count", snapshot_with(estimated_remaining_turns=1.5), "validation_error", "estimated_remaining_turns"),
    (
        "unknown_field",
        snapshot_with(context_budget_remaining_percent=37),
        "validation_error",
        "Extra inputs are not permitted",
    ),
    ("compaction_time_without_count", snapshot_with(compaction_count=0), "validation_error", "compaction_count is 0"),
    (
        "compaction_after_capture",
        snapshot_with(last_compaction_at="2026-03-25T16:00:00+08:00"),
        "validation_error",
        "later than captured_at",
    ),
    ("future_schema_version", snapshot_with(schema_version=2), "unsupported_schema_version", "schema_version"),
    ("malformed_json", b'{"thread_id": "thread-abc", ', "invalid_json", "Invalid JSON"),
    ("json_array", b"[1, 2, 3]", "validation_error", "<record>"),
    ("not_utf8", b'{"thread_id": "\xff\xfe"}', "invalid_json", "Invalid JSON"),
    ("empty_bytes", b"", "invalid_json", "Invalid JSON"),
]


@pytest.mark.parametrize(
    ("data", "reason", "fragment"), [c[1:] for c in SNAPSHOT_CASES], ids=[c[0] for c in SNAPSHOT_CASES]
)
def test_bad_snapshot_is_rejected_with_reason(data: bytes, reason: str, fragment: str) -> None:
    with pytest.raises(DecodeError) as caught:
        Codec(ThreadContextSnapshot).decode(data)
    assert caught.value.reason == reason
    assert fragment in caught.value.detail


def test_tombstone_is_rejected() -> None:
    with pytest.raises(DecodeError, match="tombstone"):
        Codec(ThreadContextSnapshot).decode(None)


def _event(index: int, **changes: Any) -> bytes:
    return dumps({**SESSION_EVENTS[index], **changes})


EVENT_CASES: list[tuple[str, bytes, str]] = [
    ("unknown_event_type", _event(1, type="message_deleted"), "does not match any of the expected tags"),
    ("missing_event_type", dumps({k: v for k, v in SESSION_EVENTS[1].items() if k != "type"}), "Unable to extract tag"),
    ("oversized_text", _event(1, text="x" * (MAX_SURFACE_TEXT_LENGTH + 1)), "at most 200000 characters"),
    ("text_and_token_count", _event(1, token_count=12), "exactly one of text or token_count"),
    ("neither_text_nor_count", dumps({k: v for k, v in SESSION_EVENTS[1].items() if k != "text"}), "exactly one"),
    ("unknown_role", _event(1, role="narrator"), "role"),
    ("unknown_trigger_mode", _event(4, trigger_mode="auto"), "'request_start', 'mid_loop' or 'manual'"),
    ("unknown_work_fact", _event(9, fact="dirty_worktree"), "fact"),
    ("negative_tokens", _event(0, input_tokens=-5), "input_tokens"),
    ("truncated_as_string", _event(2, truncated="yes"), "truncated"),
]


@pytest.mark.parametrize(("data", "fragment"), [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES])
def test_bad_session_event_is_rejected(data: bytes, fragment: str) -> None:
    with pytest.raises(DecodeError) as caught:
        Codec(SESSION_EVENT_ADAPTER).decode(data)
    assert caught.value.reason == "validation_error"
    assert fragment in caught.value.detail


MODEL_CASES: list[tuple[str, Callable[[], object], str]] = [
    (
        "ready_package_without_ready_at",
        lambda: HandoffPackage.model_validate_json(dumps({**HANDOFF_READY, "ready_at": None})),
        "needs ready_at",
    ),
    (
        "unknown_package_status",
        lambda: HandoffPackage.model_validate_json(dumps({**HANDOFF_READY, "package_status": "sent"})),
        "package_status",
    ),
    ("unordered_policy", lambda: ThresholdPolicy(project_id="p", safe_min_pct=40, watch_min_pct=60), "must satisfy"),
    ("policy_band_over_100", lambda: ThresholdPolicy(project_id="p", safe_min_pct=101), "safe_min_pct"),
    ("policy_zero_urgent_band", lambda: ThresholdPolicy(project_id="p", urgent_min_pct=0), "urgent_min_pct"),
    (
        "single_device_with_two_threads",
        lambda: Conversation.model_validate_json(
            dumps(
                {
                    "conversation_id": "c",
                    "conversation_type": "single_device",
                    "project_id": "p",
                    "project_title": "T",
                    "thread_ids": ["a", "b"],
                    "updated_at": "2026-03-25T09:26:00Z",
                }
            )
        ),
        "at most one thread",
    ),
    ("visible_ring_without_percent", lambda: ContextBudgetIndicator(visible=True, level="watch"), "needs percent"),
    ("ring_percent_fractional", lambda: ContextBudgetIndicator(visible=True, percent=52.5, level="watch"), "percent"),
]


@pytest.mark.parametrize(("build", "fragment"), [c[1:] for c in MODEL_CASES], ids=[c[0] for c in MODEL_CASES])
def test_inconsistent_record_is_rejected(build: Callable[[], object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        build()


def test_records_are_immutable() -> None:
    snapshot = Codec(ThreadContextSnapshot).decode(dumps(SNAPSHOT))
    with pytest.raises(ValueError, match="frozen"):
        snapshot.context_budget_remaining_pct = 99  # type: ignore[misc]
