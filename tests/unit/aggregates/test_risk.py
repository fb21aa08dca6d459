"""The project fold: the spec 6.2 view, published (with its client event) only when what a reader sees changes."""

from __future__ import annotations

import pytest

from schemas import Codec, ProjectContextRiskUpdated, ProjectDetail, WorkFact
from schemas.projects import ProjectState, ThreadLeft
from streams.aggregates import risk
from streams.aggregates.outputs import CLIENT_EVENTS, PROJECT_RISK, Emit
from tests.unit.aggregates.builders import CONFIG, VISIBLE_CHANGES, at, live, thread_state


class Project:
    """One project's table slot, fed thread states as the topology would."""

    def __init__(self) -> None:
        self.state: ProjectState | None = None

    def feed(self, change) -> list[Emit]:
        if change.state is not None:
            self.state = change.state
        return change.emits

    def thread(self, *args, **kwargs) -> list[Emit]:
        state = thread_state(*args, **kwargs)
        return self.feed(risk.apply_thread_state(self.state, state, state.updated_at, CONFIG))

    @property
    def view(self) -> ProjectDetail:
        return self.state.published


def test_first_thread_publishes_the_view_and_its_event() -> None:
    project = Project()
    emits = project.thread("thread-a", 37.5, seconds=5, facts=[WorkFact.UNCOMMITTED_PATCH], expected_at=65)
    assert [(e.topic, e.key) for e in emits] == [(PROJECT_RISK, "proj-1"), (CLIENT_EVENTS, "proj-1")]
    view, event = emits[0].record, emits[1].record
    assert view.next_compaction_risk_thread_id == "thread-a"
    assert view.threads_requiring_handoff == ["thread-a"]
    assert view.master_context_strategy_summary == (
        "1 live thread: 1 urgent; hand off thread-a first (urgent, 37% left; must finish before compaction: "
        "uncommitted patch; compaction expected by 08:01 UTC). No thread is safe for new subtasks: start a new thread."
    )
    (summary,) = view.active_thread_contexts
    assert (summary.thread_id, summary.context_budget_level.value, summary.must_finish_before_compaction) == (
        "thread-a",
        "urgent",
        True,
    )
    assert isinstance(event, ProjectContextRiskUpdated)
    assert event.event_id == "proj-1:thread-a:2026-03-25T08:00:05+00:00:risk"
    assert event.occurred_at == at(5)
    assert (event.next_compaction_risk_thread_id, event.threads_requiring_handoff) == ("thread-a", ["thread-a"])
    assert event.master_context_strategy_summary == view.master_context_strategy_summary


def test_changes_a_reader_cannot_see_publish_nothing_but_are_kept() -> None:
    project = Project()
    project.thread("thread-a", 52.9, seconds=0, expected_at=600)
    assert project.thread("thread-a", 52.1, seconds=5, expected_at=610) == []  # same ring percent, same minute
    assert project.state.threads[0].summary.updated_at == at(5)
    assert project.state.threads[0].summary.context_budget_remaining_pct == 52.1


@pytest.mark.parametrize(("change", "kwargs"), VISIBLE_CHANGES)
def test_each_visible_change_publishes_once(change: str, kwargs: dict) -> None:
    project = Project()
    project.thread("thread-a", **{"pct": 52.9, "expected_at": 600, "seconds": 0})
    emits = project.thread("thread-a", **{"pct": 52.9, "expected_at": 600, "seconds": 5, **kwargs})
    assert [e.topic for e in emits] == [PROJECT_RISK, CLIENT_EVENTS], change
    assert project.thread("thread-a", **{"pct": 52.9, "expected_at": 600, "seconds": 10, **kwargs}) == []


def test_view_ranks_threads_and_names_handoff_and_healthiest() -> None:
    project = Project()
    project.thread("thread-safe", 82.4, seconds=0)
    project.thread("thread-watch", 45, seconds=1, handoff_ready=True)
    project.thread("thread-urgent", 30, seconds=2, facts=[WorkFact.UNRECORDED_TEST_RESULTS])
    project.thread("thread-crit", 12, seconds=3, expected_at=120)
    view = project.view
    assert [t.thread_id for t in view.active_thread_contexts] == [
        "thread-crit",
        "thread-urgent",
        "thread-watch",
        "thread-safe",
    ]
    assert view.next_compaction_risk_thread_id == "thread-crit"
    assert view.threads_requiring_handoff == ["thread-crit", "thread-urgent"]  # watch has a ready package
    assert view.master_context_strategy_summary == (
        "4 live threads: 1 critical, 1 urgent, 1 watch, 1 safe; hand off thread-crit first (critical, 12% left; "
        "compaction expected by 08:02 UTC). Give new subtasks to thread-safe (82% left)."
    )


def test_older_replayed_state_changes_nothing() -> None:
    project = Project()
    project.thread("thread-a", 50, seconds=10)
    before = project.state
    assert risk.apply_thread_state(before, thread_state("thread-a", 20, seconds=5), at(11), CONFIG).state is None


def test_idle_threads_retire_and_the_view_follows() -> None:
    project = Project()
    project.thread("thread-old", 20, seconds=0)
    project.thread("thread-new", 70, seconds=600)
    idle = CONFIG.retire_after.total_seconds()
    assert risk.retire_idle(project.state, at(idle - 1), CONFIG).state is None
    emits = project.feed(risk.retire_idle(project.state, at(idle), CONFIG))
    assert [t.thread_id for t in emits[0].record.active_thread_contexts] == ["thread-new"]
    assert emits[0].record.next_compaction_risk_thread_id is None
    assert emits[1].record.event_id == "proj-1:retired:thread-old@2026-03-25T08:00:00+00:00:risk"
    # a late replay of the retired thread's last state does not bring it back
    late = thread_state("thread-old", 20, seconds=0)
    assert risk.apply_thread_state(project.state, late, at(idle), CONFIG).state is None


def test_a_thread_that_left_for_another_project_leaves_the_view() -> None:
    project = Project()
    project.thread("thread-a", 20, seconds=0)
    project.thread("thread-b", 70, seconds=1)
    left = ThreadLeft(thread_id="thread-a", project_id="proj-1", left_at=at(5))
    emits = project.feed(risk.apply_project_input(project.state, left, at(5), CONFIG))
    assert [t.thread_id for t in emits[0].record.active_thread_contexts] == ["thread-b"]
    assert risk.remove_thread(project.state, left).state is None  # a repeat


def test_a_removal_older_than_the_held_state_is_ignored() -> None:
    project = Project()
    project.thread("thread-a", 20, seconds=10)  # moved away at 5 and came back at 10
    left = ThreadLeft(thread_id="thread-a", project_id="proj-1", left_at=at(5))
    assert risk.remove_thread(project.state, left).state is None


def test_a_full_project_drops_the_thread_idle_longest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(risk, "MAX_LIVE_THREADS", 2)
    project = Project()
    for seconds, thread in enumerate(["thread-a", "thread-b", "thread-c"]):
        project.thread(thread, 50, seconds=seconds)
    assert sorted(t.summary.thread_id for t in project.state.threads) == ["thread-b", "thread-c"]


def test_state_survives_the_table_codec() -> None:
    project = Project()
    project.thread("thread-a", 30, seconds=0, facts=[WorkFact.UNCOMMITTED_PATCH], expected_at=60)
    codec = Codec(ProjectState)
    assert codec.decode(codec.encode(project.state)) == project.state


def test_new_subtasks_go_to_the_healthiest_threads_that_are_fresh_and_free_of_must_finish_work() -> None:
    threads = [
        live("watch-55", 55),
        live("safe-70", 70),
        live("safe-90-stale", 90, stale=True),
        live("safe-85-patch", 85, must_finish=True),
        live("urgent-35", 35),
        live("critical-10", 10),
        live("safe-95", 95),
    ]
    assert risk.subtask_targets(threads) == ["safe-95", "safe-70", "watch-55"]
    assert risk.project_view("proj-1", threads).new_subtask_thread_ids == ["safe-95", "safe-70", "watch-55"]
