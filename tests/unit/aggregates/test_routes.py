"""The routing fold forwards a thread to its project only when the project's view or ranking could change, and often
enough that a busy thread is never retired."""

from __future__ import annotations

import pytest

from schemas import Codec, ThreadState, WorkFact
from schemas.codec import encode_record
from schemas.projects import ConversationLink, ProjectInput, ThreadInProject, ThreadLeft, ThreadRoutes
from streams.aggregates import risk, routes
from streams.aggregates.outputs import CONVERSATION_THREADS, PROJECT_RISK, THREAD_STATE_BY_PROJECT, Emit
from tests.unit.aggregates.builders import CONFIG, VISIBLE_CHANGES, Feed, at, thread_state

REFRESH = CONFIG.refresh_after.total_seconds()
BASE = {"pct": 52.9, "expected_at": 600}


class Routes:
    """One thread's routing slot, fed thread states as the topology would."""

    def __init__(self) -> None:
        self.state: ThreadRoutes | None = None

    def thread(self, **kwargs) -> list[Emit]:
        change = routes.route_thread_state(self.state, thread_state("thread-a", **{**BASE, **kwargs}), CONFIG)
        if change.state is not None:
            self.state = change.state
        return change.emits


def forwarded(emits: list[Emit]) -> list[ThreadInProject | ThreadLeft]:
    return [e.record for e in emits if e.topic == THREAD_STATE_BY_PROJECT]


def test_the_first_state_is_forwarded_with_what_the_view_keeps() -> None:
    slot = Routes()
    (record,) = forwarded(slot.thread(seconds=0, facts=[WorkFact.UNCOMMITTED_PATCH]))
    assert isinstance(record, ThreadInProject)
    assert record.project_id == "proj-1"
    assert record.thread == risk.live_thread(thread_state("thread-a", **BASE, facts=[WorkFact.UNCOMMITTED_PATCH]))


def test_a_change_no_view_shows_is_neither_forwarded_nor_written() -> None:
    slot = Routes()
    slot.thread(seconds=0)
    before = slot.state
    assert slot.thread(pct=52.1, expected_at=610, seconds=5) == []  # same ring percent, same minute
    assert slot.state is before


@pytest.mark.parametrize(
    ("change", "kwargs"),
    [
        *VISIBLE_CHANGES,
        ("a work fact", {"facts": [WorkFact.UNRECORDED_TEST_RESULTS]}),
        ("a ready handoff package", {"pct": 30.0, "handoff_ready": True}),
    ],
)
def test_each_change_the_project_uses_is_forwarded_once(change: str, kwargs: dict) -> None:
    slot = Routes()
    slot.thread(seconds=0, **({"pct": 30.0} if "handoff_ready" in kwargs else {}))
    assert len(forwarded(slot.thread(seconds=5, **kwargs))) == 1, change
    assert forwarded(slot.thread(seconds=10, **kwargs)) == [], change


def test_a_thread_whose_values_hold_still_is_forwarded_again_after_the_refresh_time() -> None:
    slot = Routes()
    slot.thread(seconds=0)
    assert forwarded(slot.thread(seconds=REFRESH - 1)) == []
    (record,) = forwarded(slot.thread(seconds=REFRESH))
    assert record.thread.summary.updated_at == at(REFRESH)
    assert forwarded(slot.thread(seconds=REFRESH + 1)) == []


def test_a_replayed_older_state_is_not_forwarded() -> None:
    slot = Routes()
    slot.thread(seconds=10)
    assert slot.thread(pct=20.0, seconds=5) == []


def test_a_move_tells_the_old_project_and_forwards_to_the_new_one() -> None:
    slot = Routes()
    slot.thread(seconds=0)
    left, moved = forwarded(slot.thread(seconds=5, project="proj-2"))
    assert (type(left), left.project_id, left.left_at) == (ThreadLeft, "proj-1", at(5))
    assert (type(moved), moved.project_id) == (ThreadInProject, "proj-2")


def test_conversations_still_get_ring_changes_only() -> None:
    slot = Routes()
    slot.state = routes.apply_link(
        None, ConversationLink(conversation_id="c-1", thread_id="thread-a", linked=True)
    ).state
    assert [e.topic for e in slot.thread(seconds=0)] == [THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS]
    assert [e.topic for e in slot.thread(expected_at=660, seconds=5)] == [THREAD_STATE_BY_PROJECT]
    assert [e.topic for e in slot.thread(pct=51.9, expected_at=660, seconds=10)] == [
        THREAD_STATE_BY_PROJECT,
        CONVERSATION_THREADS,
    ]


def test_a_busy_thread_with_values_holding_still_is_never_retired() -> None:
    pipeline = Feed()
    step = REFRESH / 2
    for i in range(int(3 * CONFIG.retire_after.total_seconds() / step)):
        pipeline.thread(thread_state("thread-a", **BASE, seconds=i * step))
        pipeline.retire(at(i * step))
    views = pipeline.of(PROJECT_RISK)
    assert len(views) == 1  # published once, never retired
    assert [t.thread_id for t in views[0].active_thread_contexts] == ["thread-a"]


def test_the_project_fold_still_reads_whole_thread_states_sent_by_earlier_versions() -> None:
    old = Codec(ProjectInput).decode(encode_record(thread_state("thread-a", **BASE)))
    new = Codec(ProjectInput).decode(encode_record(forwarded(Routes().thread(seconds=0))[0]))
    assert (type(old), type(new)) == (ThreadState, ThreadInProject)
    from_old = risk.apply_project_input(None, old, at(0), CONFIG)
    from_new = risk.apply_project_input(None, new, at(0), CONFIG)
    assert from_old.state == from_new.state
    assert from_old.state.published is not None
