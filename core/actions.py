"""Master actions by level (spec 4.1, 5.2) and the wrap-up checklist (spec 8.3) filled from what the engine knows."""

from __future__ import annotations

from collections.abc import Mapping

from core.ids import bounded, short_text
from schemas import ContextBudgetLevel, KeyCommand, MasterAction, WrapUpChecklist
from schemas.enums import WorkFact
from schemas.state import ThreadState, WorkFactState

_A = MasterAction
ACTIONS_BY_LEVEL: Mapping[ContextBudgetLevel, tuple[MasterAction, ...]] = {
    # safe: keep going, keep refreshing the stage summary
    ContextBudgetLevel.SAFE: (_A.REFRESH_STAGE_SUMMARY,),
    # watch: no more large context, start preparing the handoff (the spec 5.2 response names these two)
    ContextBudgetLevel.WATCH: (_A.PREPARE_HANDOFF, _A.AVOID_LARGE_CONTEXT_APPEND),
    # urgent: finish the current atomic subtask first, pre-create the relay thread
    ContextBudgetLevel.URGENT: (
        _A.PREPARE_HANDOFF,
        _A.AVOID_LARGE_CONTEXT_APPEND,
        _A.FINISH_ATOMIC_SUBTASK,
        _A.PRECREATE_RELAY_THREAD,
    ),
    # critical: wrap up now, forbid any context growth
    ContextBudgetLevel.CRITICAL: (
        _A.PRE_COMPACTION_WRAP_UP,
        _A.PREPARE_HANDOFF,
        _A.FORBID_CONTEXT_GROWTH,
        _A.PRECREATE_RELAY_THREAD,
    ),
}

WRAP_UP_ACTIONS = frozenset({MasterAction.PREPARE_HANDOFF, MasterAction.PRE_COMPACTION_WRAP_UP})
"""Actions that count as the pre-compaction wrap-up of spec 9.5."""


def actions_for_level(level: ContextBudgetLevel) -> list[MasterAction]:
    return list(ACTIONS_BY_LEVEL[level])


def wrap_up_checklist(state: ThreadState) -> WrapUpChecklist:
    """Spec 8.3 from the thread's work-state facts and its handoff package; the worker fills in the rest."""
    active = [fact for fact in state.work_facts if fact.active]
    files = sorted({path for fact in active for path in fact.files})
    patches = [_patch(f) for f in active if f.fact is WorkFact.UNCOMMITTED_PATCH]
    tests = [f.detail for f in active if f.fact is WorkFact.UNRECORDED_TEST_RESULTS and f.detail]
    package = state.handoff
    commands = package.critical_commands if package else []
    return WrapUpChecklist(
        files=bounded(sorted({*files, *(package.critical_files if package else [])})),
        completed_patches=_completed_patches(state),
        pending_patches=patches,
        last_key_command=KeyCommand(command=commands[-1]) if commands else None,
        last_test_conclusion=tests[-1] if tests else None,
        open_questions=list(package.open_questions) if package else [],
        suggested_next_action=_suggested_next_action(state),
        evidence_links=bounded(
            sorted({*(package.critical_artifacts if package else []), *(package.decision_links if package else [])})
        ),
    )


def _completed_patches(state: ThreadState) -> list[str]:
    """Patches resolved in this cycle: an uncommitted_patch fact that was active and is resolved since the last
    compaction (the fact keeps its last detail and files)."""
    return [
        _patch(f)
        for f in state.work_facts
        if f.fact is WorkFact.UNCOMMITTED_PATCH
        and not f.active
        and (state.last_compaction_at is None or f.changed_at >= state.last_compaction_at)
    ]


def _patch(fact: WorkFactState) -> str:
    """A patch as the checklist names it: the fact's detail, or the files it touches."""
    return fact.detail or short_text(", ".join(fact.files))


def _suggested_next_action(state: ThreadState) -> str:
    pending = [fact.fact.value for fact in state.work_facts if fact.active]
    if pending:
        return "record before compaction: " + ", ".join(pending)
    return "write the handoff summary and continue in a relay thread"
