"""The 5.2 report as a snapshot, and the answer: the engine's own classification, cadence and actions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.reports import IDEMPOTENCY_KEY, SNAPSHOT_VERSION, InvalidIdentity, KnownActions, report_answer, snapshot_of
from core.actions import actions_for_level
from core.engine_config import REPORT_INTERVAL_SECONDS
from core.levels import classify_level
from schemas import DEFAULT_POLICY, MasterAction, MasterActionItem, ThresholdPolicy, WorkerReportRequest
from tests.samples import SPEC_REPORT_REQUEST, SPEC_REPORT_RESPONSE, dumps

REPORT = WorkerReportRequest.model_validate_json(dumps(SPEC_REPORT_REQUEST))


def test_the_spec_example_gets_the_spec_answer_with_the_engines_full_action_list() -> None:
    answer = report_answer(snapshot_of(REPORT, None, None), DEFAULT_POLICY).model_dump(mode="json")
    spec_actions = SPEC_REPORT_RESPONSE["master_actions"]
    assert answer.pop("open_master_actions") == []  # beside the spec's fields: nothing issued yet for a new thread
    assert {**answer, "master_actions": spec_actions} == {**SPEC_REPORT_RESPONSE, "schema_version": 1, "reason": None}
    assert answer["master_actions"][: len(spec_actions)] == spec_actions


@st.composite
def policies(draw: st.DrawFn) -> ThresholdPolicy:
    urgent = draw(st.floats(1, 90))
    watch = draw(st.floats(urgent + 0.5, 95))
    safe = draw(st.floats(watch + 0.5, 100))
    return ThresholdPolicy(project_id="*", urgent_min_pct=urgent, watch_min_pct=watch, safe_min_pct=safe)


@given(pct=st.floats(0, 100, allow_nan=False), policy=policies())
def test_the_answer_classifies_with_the_engines_function_and_policy(pct: float, policy: ThresholdPolicy) -> None:
    report = REPORT.model_copy(update={"context_budget_remaining_pct": pct})
    answer = report_answer(snapshot_of(report, None, None), policy)
    level = classify_level(pct, policy)
    assert answer.context_budget_level is level
    assert answer.next_required_report_in_seconds == REPORT_INTERVAL_SECONDS[level]
    assert answer.master_actions == actions_for_level(level)


def test_headers_give_the_snapshot_its_identity() -> None:
    snapshot = snapshot_of(REPORT, "snap-from-reporter", "123456")
    assert (snapshot.snapshot_id, snapshot.snapshot_version) == ("snap-from-reporter", 123456)
    assert snapshot.model_dump(include=set(WorkerReportRequest.model_fields)) == REPORT.model_dump()


def test_a_derived_identity_is_stable_for_the_same_report_and_grows_with_captured_at() -> None:
    first, again = snapshot_of(REPORT, None, None), snapshot_of(REPORT, None, None)
    later = snapshot_of(
        REPORT.model_copy(update={"captured_at": REPORT.captured_at + timedelta(milliseconds=1)}), None, None
    )
    assert (first.snapshot_id, first.snapshot_version) == (again.snapshot_id, again.snapshot_version)
    assert later.snapshot_version > first.snapshot_version
    assert later.snapshot_id != first.snapshot_id


@pytest.mark.parametrize(
    ("key", "version", "header"),
    [
        ("has space", None, IDEMPOTENCY_KEY),
        ("x" * 129, None, IDEMPOTENCY_KEY),
        (None, "-1", SNAPSHOT_VERSION),
        (None, "1.5", SNAPSHOT_VERSION),
        (None, "abc", SNAPSHOT_VERSION),
        (None, str(2**53 + 1), SNAPSHOT_VERSION),
    ],
)
def test_an_invalid_identity_header_is_refused_and_named(key: str | None, version: str | None, header: str) -> None:
    with pytest.raises(InvalidIdentity) as caught:
        snapshot_of(REPORT, key, version)
    assert caught.value.loc == ("header", header)


@pytest.mark.parametrize("captured_at", ["1969-12-31T23:59:59Z", "2300-01-01T00:00:00Z"])
def test_a_capture_time_outside_the_derivable_range_needs_a_version_header(captured_at: str) -> None:
    report = WorkerReportRequest.model_validate_json(
        dumps({**SPEC_REPORT_REQUEST, "captured_at": captured_at, "last_compaction_at": None, "compaction_count": 0})
    )
    with pytest.raises(InvalidIdentity) as caught:
        snapshot_of(report, None, None)
    assert caught.value.loc == ("body", "captured_at")
    assert snapshot_of(report, None, "7").snapshot_version == 7


def _item(action: MasterAction, state: str) -> MasterActionItem:
    at = REPORT.captured_at
    return MasterActionItem(
        action_id=f"t:{action.value}",
        action=action,
        state=state,
        context_budget_level="watch",
        issued_at=at,
        state_changed_at=at,
    )


def test_the_answer_leaves_out_what_is_done_in_this_cycle_and_names_the_open_ones_by_id() -> None:
    # The spec report is urgent (37 %) in its cycle 1: prepare_handoff was done there, avoid_large_context_append
    # was acknowledged; the rest is due but not issued yet.
    known = KnownActions(
        1,
        [_item(MasterAction.PREPARE_HANDOFF, "done"), _item(MasterAction.AVOID_LARGE_CONTEXT_APPEND, "acknowledged")],
    )
    answer = report_answer(snapshot_of(REPORT, None, None), DEFAULT_POLICY, known=known)
    assert answer.master_actions == [
        MasterAction.AVOID_LARGE_CONTEXT_APPEND,
        MasterAction.FINISH_ATOMIC_SUBTASK,
        MasterAction.PRECREATE_RELAY_THREAD,
    ]
    assert [i.action_id for i in answer.open_master_actions] == ["t:avoid_large_context_append"]


def test_a_report_that_starts_a_new_cycle_owes_every_action_again() -> None:
    known = KnownActions(0, [_item(MasterAction.PREPARE_HANDOFF, "done")])
    answer = report_answer(snapshot_of(REPORT, None, None), DEFAULT_POLICY, known=known)
    assert answer.master_actions == actions_for_level(answer.context_budget_level)
    assert answer.open_master_actions == []


def test_a_handoff_the_master_requested_in_this_cycle_is_in_the_answer_of_a_safe_thread() -> None:
    safe = REPORT.model_copy(update={"context_budget_remaining_pct": 90.0, "context_budget_level": "safe"})
    requested = _item(MasterAction.PREPARE_HANDOFF, "issued").model_copy(update={"action_id": "handoff-request-1"})
    answer = report_answer(snapshot_of(safe, None, None), DEFAULT_POLICY, known=KnownActions(1, [requested]))
    assert answer.master_actions == [MasterAction.REFRESH_STAGE_SUMMARY, MasterAction.PREPARE_HANDOFF]
    assert [i.action_id for i in answer.open_master_actions] == ["handoff-request-1"]
    done = requested.model_copy(update={"state": "done"})
    answer = report_answer(snapshot_of(safe, None, None), DEFAULT_POLICY, known=KnownActions(1, [done]))
    assert answer.master_actions == [MasterAction.REFRESH_STAGE_SUMMARY]  # a finished request is not asked again
