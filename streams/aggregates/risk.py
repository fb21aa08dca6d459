"""The project fold: a project's live threads, ranked, and the view the master and the project page read (spec 6.2).

Every thread state is kept (retirement needs its latest time), but the view and its `project.context_risk.updated`
event go out only when what a reader sees changes: the thread set, a ring percent, a level, must-finish, expected
compaction to the minute, staleness, or the derived fields. A percent drifting inside one integer, or a forecast
moving by seconds, republishes nothing.

The event carries the time of its cause (the thread's state, its move, the retirement deadline), never the clock of
the worker applying it, so a replay publishes the same records; retirement judges a record by its time in the log.
"""

from __future__ import annotations

from datetime import datetime

from core import handoff
from schemas import ContextBudgetLevel, MasterAction, ProjectContextRiskUpdated, ProjectDetail, ThreadState
from schemas.copies import replaced
from schemas.projects import MAX_LIVE_THREADS, LiveThread, ProjectInput, ProjectState, ThreadInProject, ThreadLeft
from schemas.views import ThreadContextSummary
from streams.aggregates.config import ProjectsConfig
from streams.aggregates.outputs import CLIENT_EVENTS, PROJECT_RISK, Change, Emit, stable_id
from streams.aggregates.ranking import next_compaction_risk, rank
from streams.aggregates.resolution import seen_values
from streams.aggregates.summary import strategy_summary

UNCHANGED: Change[ProjectState] = Change(None)


def apply_project_input(
    state: ProjectState | None, record: ProjectInput, now: datetime, config: ProjectsConfig
) -> Change[ProjectState]:
    """One record of `thread-state-by-project`, taken into the log at `now`."""
    if isinstance(record, ThreadLeft):
        return remove_thread(state, record)
    if isinstance(record, ThreadState):
        return apply_thread_state(state, record, now, config)
    return apply_live_thread(state, record, now, config)


def apply_thread_state(
    state: ProjectState | None,
    thread: ThreadState,
    now: datetime,
    config: ProjectsConfig,
    importance: int | None = None,
) -> Change[ProjectState]:
    """A thread's new state. `importance` is its task's importance when the caller knows it (spec 8.1)."""
    live = ThreadInProject(project_id=thread.project_id, thread=live_thread(thread, importance))
    return apply_live_thread(state, live, now, config)


def apply_live_thread(
    state: ProjectState | None, record: ThreadInProject, now: datetime, config: ProjectsConfig
) -> Change[ProjectState]:
    """What the view keeps of one of the project's threads, newly forwarded."""
    live = record.thread
    thread_id, updated_at = live.summary.thread_id, live.summary.updated_at
    state = state or ProjectState(project_id=record.project_id)
    held = _find(state, thread_id)
    if held is not None and updated_at < held.summary.updated_at:
        return UNCHANGED  # a replayed older state
    if now - updated_at >= config.retire_after:
        return UNCHANGED  # already idle past retirement: a late replay must not bring a finished thread back
    if live == held:
        return UNCHANGED
    others = [t for t in state.threads if t.summary.thread_id != thread_id]
    if len(others) >= MAX_LIVE_THREADS:
        others.remove(min(others, key=lambda t: t.summary.updated_at))  # the thread idle longest makes room
    cause = stable_id(state.project_id, thread_id, updated_at.isoformat())
    return _republish(state, [*others, live], cause, updated_at)


def remove_thread(state: ProjectState | None, left: ThreadLeft) -> Change[ProjectState]:
    """The thread now reports under another project: it leaves this one (unless it came back since)."""
    held = _find(state, left.thread_id) if state else None
    if state is None or held is None or held.summary.updated_at > left.left_at:
        return UNCHANGED
    others = [t for t in state.threads if t is not held]
    cause = stable_id(state.project_id, left.thread_id, "left", left.left_at.isoformat())
    return _republish(state, others, cause, left.left_at)


def retire_idle(state: ProjectState, now: datetime, config: ProjectsConfig) -> Change[ProjectState]:
    """Timer: threads whose state has not changed for `retire_after` leave the view, at the latest of their
    retirement deadlines (the one that fired), so that a timer run again publishes the same records."""
    idle = [t for t in state.threads if now - t.summary.updated_at >= config.retire_after]
    if not idle:
        return UNCHANGED
    retired = sorted(f"{t.summary.thread_id}@{t.summary.updated_at.isoformat()}" for t in idle)
    live = [t for t in state.threads if t not in idle]
    deadline = max(t.summary.updated_at for t in idle) + config.retire_after
    return _republish(state, live, stable_id(state.project_id, "retired", *retired), deadline)


def live_thread(thread: ThreadState, importance: int | None = None) -> LiveThread:
    return LiveThread(
        summary=ThreadContextSummary(
            thread_id=thread.thread_id,
            node_id=thread.node_id,
            task_id=thread.task_id,
            context_budget_remaining_pct=thread.context_budget_remaining_pct,
            context_budget_level=thread.context_budget_level,
            must_finish_before_compaction=thread.must_finish_before_compaction,
            compaction_expected_at=thread.compaction_expected_at,
            stale=thread.stale,
            updated_at=thread.updated_at,
        ),
        active_facts=sorted({f.fact for f in thread.work_facts if f.active}),
        requires_handoff=requires_handoff(thread),
        task_importance=importance,
    )


def requires_handoff(thread: ThreadState) -> bool:
    """The engine's `thread.handoff.required` condition: a handoff is due by the level and no package is ready."""
    due = MasterAction.PREPARE_HANDOFF in thread.due_actions or thread.context_budget_level in (
        ContextBudgetLevel.URGENT,
        ContextBudgetLevel.CRITICAL,
    )
    return due and not handoff.thread_ready(thread)


def project_view(project_id: str, ranked: list[LiveThread]) -> ProjectDetail:
    return ProjectDetail(project_id=project_id, **_derived(ranked))


def _derived(ranked: list[LiveThread]) -> dict:
    risk = next_compaction_risk(ranked)
    requiring = [t for t in ranked if t.requires_handoff]
    return {
        "active_thread_contexts": [_shown_summary(t) for t in ranked],
        "next_compaction_risk_thread_id": risk.summary.thread_id if risk else None,
        "threads_requiring_handoff": [t.summary.thread_id for t in requiring],
        "master_context_strategy_summary": strategy_summary(ranked, requiring),
        "new_subtask_thread_ids": subtask_targets(ranked),
    }


def _shown_summary(thread: LiveThread) -> ThreadContextSummary:
    """The view's entry of a thread: its summary and the task importance that ranks it."""
    if thread.task_importance is None:
        return thread.summary
    return replaced(thread.summary, {"task_importance": thread.task_importance})


SUBTASK_LEVELS = frozenset({ContextBudgetLevel.SAFE, ContextBudgetLevel.WATCH})
"""Levels that may take new work: urgent asks a thread to finish its current subtask, critical to wrap up (4.1)."""


def subtask_targets(threads: list[LiveThread]) -> list[str]:
    """Spec 8.2 point 4: the threads new subtasks should go to, the most remaining budget first."""
    fit = [
        t.summary
        for t in threads
        if t.summary.context_budget_level in SUBTASK_LEVELS
        and not t.summary.stale
        and not t.summary.must_finish_before_compaction
    ]
    return [s.thread_id for s in sorted(fit, key=lambda s: (-s.context_budget_remaining_pct, s.thread_id))]


def _republish(state: ProjectState, threads: list[LiveThread], cause: str, now: datetime) -> Change[ProjectState]:
    ranked = rank(threads)
    fields = _derived(ranked)
    if state.published is not None and _looks_the_same(fields, state.published):
        return Change(replaced(state, {"threads": ranked}))
    view = ProjectDetail(project_id=state.project_id, **fields)
    event = ProjectContextRiskUpdated(
        event_id=stable_id(cause, "risk"),
        occurred_at=now,
        project_id=state.project_id,
        next_compaction_risk_thread_id=view.next_compaction_risk_thread_id,
        threads_requiring_handoff=view.threads_requiring_handoff,
        master_context_strategy_summary=view.master_context_strategy_summary,
    )
    return Change(
        replaced(state, {"threads": ranked, "published": view}),
        [Emit(PROJECT_RISK, state.project_id, view), Emit(CLIENT_EVENTS, state.project_id, event)],
    )


def _looks_the_same(fields: dict, published: ProjectDetail) -> bool:
    """Whether a reader of the view would see what `published` shows: the same threads in the same order at the
    resolution a reader sees them, and the same derived fields. An unchanged thread's summary is the very object the
    view holds (records are immutable), so only a changed one is compared by its values."""
    shown, held = fields["active_thread_contexts"], published.active_thread_contexts
    return (
        fields["next_compaction_risk_thread_id"] == published.next_compaction_risk_thread_id
        and fields["threads_requiring_handoff"] == published.threads_requiring_handoff
        and fields["master_context_strategy_summary"] == published.master_context_strategy_summary
        and len(shown) == len(held)
        and all(a is b or seen_values(a) == seen_values(b) for a, b in zip(shown, held, strict=True))
    )


def _find(state: ProjectState, thread_id: str) -> LiveThread | None:
    return next((t for t in state.threads if t.summary.thread_id == thread_id), None)
