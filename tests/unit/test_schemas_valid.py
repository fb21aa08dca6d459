"""The spec's own examples and every record type decode, and re-encode to the same JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    DEFAULT_POLICY,
    SESSION_EVENT_ADAPTER,
    Codec,
    ContextBudgetLevel,
    ConversationItem,
    DeadLetter,
    HandoffPackage,
    MasterAction,
    SourceKind,
    ThreadContextSnapshot,
    ThresholdPolicy,
    WorkerReportRequest,
    WorkerReportResponse,
)
from schemas.session_events import CompactionSummary, ToolResultAdded, UsageSample
from tests.samples import (
    HANDOFF_READY,
    SESSION_EVENTS,
    SNAPSHOT,
    SPEC_CONVERSATION_ITEM,
    SPEC_REPORT_REQUEST,
    SPEC_REPORT_RESPONSE,
    dumps,
)


def _same_json(encoded: bytes, original: dict) -> None:
    """Encoded output carries the original's fields with equal values (numbers and instants compared as such)."""
    decoded = json.loads(encoded)
    assert decoded.pop("schema_version") == 1
    for key, value in original.items():
        got = decoded[key]
        if isinstance(value, str) and isinstance(got, str) and "T" in value and value[:4].isdigit():
            assert datetime.fromisoformat(got) == datetime.fromisoformat(value), key
        else:
            assert got == value, key


def test_spec_report_request_decodes_with_exact_field_values() -> None:
    report = Codec(WorkerReportRequest).decode(dumps(SPEC_REPORT_REQUEST))
    assert report.source_kind is SourceKind.WORKER_ESTIMATOR
    assert report.context_budget_level is ContextBudgetLevel.URGENT
    assert report.context_budget_remaining_pct == 37
    assert report.captured_at.utcoffset() == timedelta(hours=8)
    assert report.compaction_expected_at == datetime(2026, 3, 25, 8, 8, 30, tzinfo=UTC)
    _same_json(Codec(WorkerReportRequest).encode(report), SPEC_REPORT_REQUEST)


def test_spec_report_response_round_trips() -> None:
    response = Codec(WorkerReportResponse).decode(dumps(SPEC_REPORT_RESPONSE))
    assert response.master_actions == [MasterAction.PREPARE_HANDOFF, MasterAction.AVOID_LARGE_CONTEXT_APPEND]
    _same_json(Codec(WorkerReportResponse).encode(response), SPEC_REPORT_RESPONSE)


def test_spec_conversation_item_round_trips() -> None:
    item = Codec(ConversationItem).decode(dumps(SPEC_CONVERSATION_ITEM))
    assert item.context_budget_indicator.percent == 52
    assert item.context_budget_indicator.style == "ring_percent"
    encoded = json.loads(Codec(ConversationItem).encode(item))
    assert encoded["context_budget_indicator"] == {
        **SPEC_CONVERSATION_ITEM["context_budget_indicator"],
        "stale": False,
        "schema_version": 1,
    }


def test_snapshot_is_the_report_plus_identity() -> None:
    snapshot = Codec(ThreadContextSnapshot).decode(dumps(SNAPSHOT))
    assert (snapshot.snapshot_id, snapshot.snapshot_version) == ("snap-1", 7)
    assert set(WorkerReportRequest.model_fields) < set(ThreadContextSnapshot.model_fields)


def test_report_optional_fields_may_be_absent() -> None:
    required = {
        k: SPEC_REPORT_REQUEST[k]
        for k in (
            "node_id",
            "worker_id",
            "thread_id",
            "project_id",
            "source_kind",
            "context_budget_remaining_pct",
            "context_budget_level",
            "captured_at",
        )
    }
    report = Codec(WorkerReportRequest).decode(dumps(required))
    assert report.task_id is None
    assert report.last_compaction_at is None
    assert report.compaction_count == 0


@pytest.mark.parametrize("event", SESSION_EVENTS, ids=lambda e: e["type"])
def test_every_session_event_type_round_trips(event: dict) -> None:
    codec = Codec(SESSION_EVENT_ADAPTER)
    decoded = codec.decode(dumps(event))
    assert decoded.type == event["type"]
    assert codec.decode(codec.encode(decoded)) == decoded


def test_session_event_union_covers_every_declared_type() -> None:
    declared = {e["type"] for e in SESSION_EVENTS}
    schema = SESSION_EVENT_ADAPTER.json_schema()
    assert declared == set(schema["discriminator"]["mapping"])


def test_handoff_package_round_trips() -> None:
    package = Codec(HandoffPackage).decode(dumps(HANDOFF_READY))
    assert package.package_status == "ready"
    assert Codec(HandoffPackage).decode(Codec(HandoffPackage).encode(package)) == package


def test_default_policy_is_spec_section_4() -> None:
    assert (DEFAULT_POLICY.safe_min_pct, DEFAULT_POLICY.watch_min_pct, DEFAULT_POLICY.urgent_min_pct) == (60, 40, 25)
    assert DEFAULT_POLICY.project_id == "*"


@given(bounds=st.lists(st.floats(min_value=0.01, max_value=100), min_size=3, max_size=3, unique=True))
def test_any_strictly_ordered_bounds_make_a_valid_policy(bounds: list[float]) -> None:
    urgent, watch, safe = sorted(bounds)
    policy = ThresholdPolicy(project_id="p", safe_min_pct=safe, watch_min_pct=watch, urgent_min_pct=urgent)
    assert policy.urgent_min_pct < policy.watch_min_pct < policy.safe_min_pct <= 100


def test_dead_letter_keeps_arbitrary_bytes_exactly() -> None:
    raw = b'{"thread_id": \xff\xfe not json'
    letter = DeadLetter(
        source_topic="ctx.snapshots",
        partition=1,
        offset=42,
        reason="invalid_json",
        original_key=b"thread-abc",
        original_value=raw,
        received_at=datetime.now(UTC),
    )
    codec = Codec(DeadLetter)
    assert codec.decode(codec.encode(letter)).original_value == raw


def test_text_or_tokens_accepts_either_measure() -> None:
    base = {"thread_id": "t", "event_id": "e", "occurred_at": datetime.now(UTC), "tool_name": "grep_search"}
    assert ToolResultAdded(**base, text="x").token_count is None
    assert ToolResultAdded(**base, token_count=3).text is None
    summary = CompactionSummary(
        thread_id="t", event_id="e", occurred_at=datetime.now(UTC), trigger_mode="mid_loop", summary_token_count=286
    )
    assert summary.summary_text is None


aware_times = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone(timedelta(hours=8)))
)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.:", min_size=1, max_size=64)


@given(
    thread_id=ids,
    pct=st.floats(min_value=0, max_value=100, allow_nan=False),
    level=st.sampled_from(ContextBudgetLevel),
    source=st.sampled_from(SourceKind),
    captured=aware_times,
    version=st.integers(min_value=0, max_value=2**53),
    count=st.integers(min_value=0, max_value=10_000),
)
def test_snapshot_encode_decode_is_identity(thread_id, pct, level, source, captured, version, count) -> None:
    snapshot = ThreadContextSnapshot(
        snapshot_id=f"s-{version}",
        snapshot_version=version,
        thread_id=thread_id,
        project_id="p",
        node_id="n",
        worker_id="w",
        source_kind=source,
        context_budget_remaining_pct=pct,
        context_budget_level=level,
        captured_at=captured,
        compaction_count=count,
    )
    codec = Codec(ThreadContextSnapshot)
    assert codec.decode(codec.encode(snapshot)) == snapshot


def test_usage_sample_defaults() -> None:
    sample = UsageSample(thread_id="t", event_id="e", occurred_at=datetime.now(UTC), input_tokens=10)
    assert (sample.cached_input_tokens, sample.output_tokens, sample.context_window_tokens) == (0, 0, None)
