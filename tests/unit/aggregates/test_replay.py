"""Issue 20.11 for the project folds: a replayed batch, or the retirement timer run again, publishes byte-identical
records. Their times come from their causes (the thread's or the registry entry's time, the deadline that fired),
and the retirement guard judges a record by its time in the log, never by the clock of the worker applying it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from core.engine_config import EngineConfig
from core.topics import DEADLETTER, SNAPSHOTS, TASK_IMPORTANCE
from schemas import ConversationType, Record
from schemas.codec import encode_record
from schemas.projects import ConversationLink, ShownThread, ThreadInProject, ThreadLeft
from streams.aggregates import risk, routes
from streams.aggregates.batch import (
    CONVERSATIONS,
    indicators_batch,
    projects_batch,
    retire_idle_projects,
)
from streams.aggregates.outputs import (
    CLIENT_EVENTS,
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    THREAD_STATE_BY_PROJECT,
    ConversationThread,
)
from streams.batching import BatchResult, InputMessage
from streams.engine.routing import fused_batch
from tests.unit.aggregates.builders import CONFIG, PREFIX, at, conversation, importance, thread_state
from tests.unit.engine.builders import snapshot

LATER = CONFIG.retire_after + timedelta(hours=1)
"""How much later the replay runs: past the retirement horizon of every input, as after a long outage."""


def _messages(inputs: list[tuple[str, str, Record | bytes]]) -> list[InputMessage]:
    return [
        InputMessage(topic, 0, offset, key.encode(), value if isinstance(value, bytes) else encode_record(value),
                     timestamp=at(offset + 1))
        for offset, (topic, key, value) in enumerate(inputs)
    ]  # fmt: skip


def _published(result: BatchResult) -> list[tuple[str, str, bytes]]:
    return [(e.topic, e.key, encode_record(e.record)) for e in result.emits]


def _twice(batch: Callable, messages: list[InputMessage]) -> tuple[BatchResult, BatchResult]:
    first = batch(messages, {}.get, at(10))
    return first, batch(messages, {}.get, at(10) + LATER)


def _in_project(thread: str, pct: float, seconds: float, project: str = "proj-1") -> ThreadInProject:
    return ThreadInProject(project_id=project, thread=risk.live_thread(thread_state(thread, pct, seconds=seconds)))


def _shown(thread: str, pct: float, seconds: float) -> ShownThread:
    return routes.shown_thread(thread_state(thread, pct, seconds=seconds))


def test_the_engine_batch_with_its_routing_applied_twice_publishes_identical_records() -> None:
    link = ConversationLink(conversation_id="c-1", thread_id="thread-a", linked=True)
    messages = _messages([
        (SNAPSHOTS, "thread-a", snapshot(80, seconds=0)),
        (CONVERSATION_LINKS, "thread-a", link),
        (SNAPSHOTS, "thread-a", snapshot(30, seconds=2)),
        (TASK_IMPORTANCE, "thread-a", importance("thread-a", 5, seconds=3)),
        (CONVERSATION_LINKS, "thread-a", b"{}"),
    ])  # fmt: skip
    first, replay = _twice(
        lambda m, load, now: fused_batch(m, load, {}.get, now, EngineConfig(), CONFIG, PREFIX), messages
    )
    routed = [e for e in first.emits if e.topic in (THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS)]
    assert {e.topic for e in routed} == {THREAD_STATE_BY_PROJECT, CONVERSATION_THREADS}
    assert [d.record.reason for d in first.emits if d.topic == DEADLETTER] == ["validation_error"]
    assert _published(replay) == _published(first)
    assert replay.states == first.states


def test_the_project_batch_applied_twice_publishes_identical_records() -> None:
    messages = _messages([
        (THREAD_STATE_BY_PROJECT, "proj-1", _in_project("thread-a", 80, 0)),
        (THREAD_STATE_BY_PROJECT, "proj-1", _in_project("thread-b", 30, 1)),
        (THREAD_STATE_BY_PROJECT, "proj-1", ThreadLeft(thread_id="thread-a", project_id="proj-1", left_at=at(2))),
        (THREAD_STATE_BY_PROJECT, "proj-1", b"not json"),
    ])  # fmt: skip
    first, replay = _twice(lambda m, load, now: projects_batch(m, load, now, CONFIG, PREFIX), messages)
    events = [e.record for e in first.emits if e.topic == CLIENT_EVENTS]
    assert [event.occurred_at for event in events] == [at(0), at(1), at(2)]  # the causes' times
    assert _published(replay) == _published(first)
    assert replay.states == first.states


def test_a_record_idle_past_retirement_when_the_log_took_it_is_refused_on_every_pass() -> None:
    stale = _in_project("thread-old", 20, 0)
    [message] = _messages([(THREAD_STATE_BY_PROJECT, "proj-1", stale)])
    message = replace(message, timestamp=at(0) + CONFIG.retire_after)
    for now in (at(0), at(0) + LATER):
        assert projects_batch([message], {}.get, now, CONFIG, PREFIX).emits == []


def test_the_indicator_batch_applied_twice_publishes_identical_records() -> None:
    single = conversation("c-1", ConversationType.SINGLE_DEVICE, ["thread-a"], seconds=1)
    messages = _messages([
        (CONVERSATIONS, "c-1", single),
        (CONVERSATION_THREADS, "c-1", ConversationThread(conversation_id="c-1", shown=_shown("thread-a", 80, 3))),
        (CONVERSATION_THREADS, "c-1", ConversationThread(conversation_id="c-1", shown=_shown("thread-a", 30, 4))),
        (CONVERSATIONS, "c-1", single.model_copy(update={"manual_pinned": True, "updated_at": at(5)})),
        (CONVERSATIONS, "c-1", b"[]"),
    ])  # fmt: skip
    first, replay = _twice(lambda m, load, now: indicators_batch(m, load, now, PREFIX), messages)
    events = [e.record for e in first.emits if e.topic == CLIENT_EVENTS]
    assert [event.occurred_at for event in events] == [at(3), at(4)]  # the thread values' times
    assert _published(replay) == _published(first)
    assert replay.states == first.states


def test_a_retirement_carries_the_deadline_that_fired_it() -> None:
    messages = _messages([
        (THREAD_STATE_BY_PROJECT, "proj-1", _in_project("thread-a", 80, 0)),
        (THREAD_STATE_BY_PROJECT, "proj-1", _in_project("thread-b", 30, 7)),
    ])  # fmt: skip
    states = projects_batch(messages, {}.get, at(10), CONFIG, PREFIX).states
    deadline = at(7) + CONFIG.retire_after
    late = retire_idle_projects(states.items(), deadline + timedelta(seconds=3), CONFIG)
    later = retire_idle_projects(states.items(), deadline + timedelta(seconds=9), CONFIG)
    assert _published(late)
    assert _published(later) == _published(late)
    [event] = [e.record for e in late.emits if e.topic == CLIENT_EVENTS]
    assert event.occurred_at == deadline
