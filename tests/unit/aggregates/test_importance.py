"""Task importance (spec 8.1) set on `task-importance` ranks a thread among otherwise equal ones in its project's view,
whether it arrives before or after the thread's state, and the newest setting wins."""

from __future__ import annotations

from core.topics import TASK_IMPORTANCE
from schemas import ProjectDetail
from streams.aggregates.outputs import PROJECT_RISK
from tests.unit.aggregates.builders import T0, Feed, aggregates, importance, thread_state


def _order(pipeline: Feed) -> list[str]:
    view: ProjectDetail = pipeline.of(PROJECT_RISK)[-1]
    return [t.thread_id for t in view.active_thread_contexts]


def _equal_pair(pipeline: Feed) -> None:
    pipeline.thread(thread_state("thread-a", 30.0, seconds=0))
    pipeline.thread(thread_state("thread-b", 30.0, seconds=1))


def test_equal_threads_rank_by_id_until_an_importance_is_set() -> None:
    pipeline = Feed()
    _equal_pair(pipeline)
    assert _order(pipeline) == ["thread-a", "thread-b"]
    pipeline.importance(importance("thread-b", 7, seconds=2))
    assert _order(pipeline) == ["thread-b", "thread-a"]
    shown = {t.thread_id: t.task_importance for t in pipeline.of(PROJECT_RISK)[-1].active_thread_contexts}
    assert shown == {"thread-a": None, "thread-b": 7}


def test_a_higher_importance_outranks_a_lower_one() -> None:
    pipeline = Feed()
    _equal_pair(pipeline)
    pipeline.importance(importance("thread-b", 3, seconds=2))
    pipeline.importance(importance("thread-a", 9, seconds=3))
    assert _order(pipeline) == ["thread-a", "thread-b"]


def test_importance_never_outranks_severity() -> None:
    pipeline = Feed()
    pipeline.thread(thread_state("thread-a", 10.0, seconds=0))  # critical
    pipeline.thread(thread_state("thread-b", 30.0, seconds=1))  # urgent
    pipeline.importance(importance("thread-b", 1_000, seconds=2))
    assert _order(pipeline) == ["thread-a", "thread-b"]


def test_an_importance_set_before_the_first_state_applies_when_the_thread_reports() -> None:
    pipeline = Feed()
    assert pipeline.importance(importance("thread-b", 5, seconds=0)) == []
    _equal_pair(pipeline)
    assert _order(pipeline) == ["thread-b", "thread-a"]


def test_an_older_setting_replayed_after_a_newer_one_changes_nothing() -> None:
    pipeline = Feed()
    _equal_pair(pipeline)
    pipeline.importance(importance("thread-b", 0, seconds=5))
    published = len(pipeline.published)
    assert pipeline.importance(importance("thread-b", 9, seconds=2)) == []
    assert len(pipeline.published) == published
    assert pipeline.routes("thread-b").importance.task_importance == 0


def test_the_importance_stays_on_later_states_of_the_thread() -> None:
    pipeline = Feed()
    _equal_pair(pipeline)
    pipeline.importance(importance("thread-b", 4, seconds=2))
    pipeline.thread(thread_state("thread-b", 29.0, seconds=3))
    assert pipeline.projects["proj-1"].threads[0].task_importance == 4


def test_the_batch_fold_reads_the_topic_and_dead_letters_a_record_keyed_by_another_thread() -> None:
    topics = aggregates(T0)
    topics.produce("thread-state", "thread-a", thread_state("thread-a", 30.0, seconds=0))
    topics.produce("thread-state", "thread-b", thread_state("thread-b", 30.0, seconds=1))
    topics.produce(TASK_IMPORTANCE, "thread-b", importance("thread-b", 6, seconds=2))
    topics.produce(TASK_IMPORTANCE, "thread-a", importance("thread-b", 9, seconds=3))
    topics.drain()
    view = topics.latest(PROJECT_RISK)["proj-1"]
    assert [t.thread_id for t in view.active_thread_contexts] == ["thread-b", "thread-a"]
    dead = [e.record for e in topics.published if e.topic == "deadletter"]
    assert [d.reason for d in dead] == ["key_mismatch"]
