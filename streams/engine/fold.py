"""The per-thread fold: an input (or a timer tick) and the thread's slot in; the new slot and records to publish out.

Every input first changes the raw facts (the accepted snapshot, work-state facts, the handoff package, an ack), then
`_derive` recomputes what follows from them (must-finish, compaction risk, alerts, due master actions, handoff
required) and emits a record for each derived value that changed. Emitting on change only keeps outputs and
changelog writes proportional to real change, and replaying an input that changed nothing emits nothing.

Event ids are built from the cause (the snapshot, event or package that triggered them), so a consumer that sees a
record twice after a restart can drop the repeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import Field

from core import action_lifecycle, handoff
from core.actions import WRAP_UP_ACTIONS, actions_for_level, wrap_up_checklist
from core.engine_config import EngineConfig
from core.ids import derived_id
from core.levels import classify_level, report_interval_seconds
from core.precedence import Verdict, judge, record_mark
from core.topics import ALERTS, CLIENT_EVENTS, CONTEXT_EVENTS, MASTER_ACTIONS
from schemas import (
    AlertCommand,
    AlertType,
    CompactionStarted,
    CompactRequested,
    ContextBudgetLevel,
    ContextEvent,
    ContextEventType,
    HandoffPackage,
    MasterAction,
    MasterActionCommand,
    MasterActionCommandKind,
    MasterActionState,
    Record,
    ThreadContextSnapshot,
    ThreadHandoffReady,
    ThreadHandoffRequired,
    ThreadMasterActionIssued,
    ThreadWorkerMoved,
    ThresholdPolicy,
    WorkFactChanged,
    WrapUpChecklist,
)
from schemas.admission import captured_at_refusal, version_refusal
from schemas.copies import replaced
from schemas.projects import ThreadRoutes
from schemas.state import ThreadState, WorkFactState
from streams.batching import Emit
from streams.engine import alerts


class ThreadSlot(Record):
    """The state table's value: the thread's state, plus what arrived before its first snapshot."""

    state: ThreadState | None = None
    early_work_facts: list[WorkFactState] = Field(default_factory=list)
    early_handoff: HandoffPackage | None = None
    early_compact_request: CompactRequested | None = None
    """A manual compaction requested before the thread's first snapshot (the API publishes a request and the report
    it follows on different topics): issued once that snapshot gives the thread a state."""
    routes: ThreadRoutes | None = None
    """Where the thread's state goes (its project, the conversations that show it): kept by the routing fused into
    the engine (`streams.engine.routing`); the engine's own folds neither read nor keep it."""


@dataclass(frozen=True)
class Step:
    slot: ThreadSlot | None
    """The new slot; None when the input changed nothing."""
    emits: list[Emit] = field(default_factory=list)
    verdict: Verdict | None = None
    """For snapshots: accepted, or why not."""


UNCHANGED = Step(None)


# -- admission ------------------------------------------------------------------------------------------------------
def refusal(slot: ThreadSlot | None, record: object, now: datetime) -> tuple[str, str] | None:
    """(reason, detail) when the record is refused before folding (it is dead-lettered), else None.

    A thread belongs to the project it was first reported under: a snapshot, package or session event naming another
    project would move it (and its ring) into that project. Within it, a thread belongs to the worker that first
    reported it (or the one an operator moved it to, `ThreadWorkerMoved`): a snapshot or session event naming another
    worker would take it over (its reports, its packages, its actions). A snapshot's captured_at must be near `now` and
    its version not ahead of it (schemas.admission), else it would vanish from history or freeze the thread.
    """
    owner = (
        slot.state.project_id
        if slot and slot.state
        else (slot.early_handoff.project_id if slot and slot.early_handoff else None)
    )
    named = getattr(record, "project_id", None)
    if owner is not None and named is not None and named != owner:
        return "project_mismatch", f"the thread belongs to project {owner!r}, the record names {named!r}"
    worker = slot.state.worker_id if slot and slot.state else None
    if isinstance(record, ThreadWorkerMoved):
        if worker is None:
            return "thread_unknown", "a move of a thread the engine has no state for"
        if record.from_worker_id != worker:
            return "worker_mismatch", f"moved from {record.from_worker_id!r}, but the thread is {worker!r}'s now"
    elif worker is not None and (named_worker := getattr(record, "worker_id", None)) not in (None, worker):
        detail = f"the thread belongs to worker {worker!r}, the record names {named_worker!r}; an operator moves it"
        return "worker_mismatch", detail
    if isinstance(record, ThreadContextSnapshot):
        problem = captured_at_refusal(record.captured_at, now) or version_refusal(
            record.snapshot_version, record.captured_at
        )
        if problem is not None:
            return "implausible_time", problem
    return None


# -- inputs ---------------------------------------------------------------------------------------------------------
def apply_snapshot(
    slot: ThreadSlot | None,
    snapshot: ThreadContextSnapshot,
    policy: ThresholdPolicy,
    now: datetime,
    config: EngineConfig,
) -> Step:
    slot = slot or ThreadSlot()
    previous = slot.state
    verdict = judge(snapshot, previous)
    if verdict is not Verdict.ACCEPT:
        return Step(None, verdict=verdict)

    level = classify_level(snapshot.context_budget_remaining_pct, policy)
    interval = report_interval_seconds(level, config)
    compacted = previous is not None and snapshot.compaction_count > previous.compaction_count
    carried = previous or _first_state(slot, snapshot, now)
    # A wrap-up request is not a wrap-up (spec 9.5): only a package ready for the cycle that ends here prepares it.
    unprepared = (
        not handoff.thread_ready(carried)
        if compacted
        else carried.compaction_unprepared and level is not ContextBudgetLevel.SAFE
    )
    state = replaced(
        carried,
        {
            "thread_id": snapshot.thread_id,
            "project_id": snapshot.project_id,
            "task_id": snapshot.task_id,
            "node_id": snapshot.node_id,
            "worker_id": snapshot.worker_id,
            "source_kind": snapshot.source_kind,
            "snapshot_id": snapshot.snapshot_id,
            "snapshot_version": snapshot.snapshot_version,
            "captured_at": snapshot.captured_at,
            "context_budget_remaining_pct": snapshot.context_budget_remaining_pct,
            "reported_level": snapshot.context_budget_level,
            "context_budget_level": level,
            "compaction_expected_at": snapshot.compaction_expected_at,
            "estimated_remaining_turns": snapshot.estimated_remaining_turns,
            "estimated_remaining_large_messages": snapshot.estimated_remaining_large_messages,
            "last_compaction_at": snapshot.last_compaction_at,
            "compaction_count": snapshot.compaction_count,
            "worker_must_finish": snapshot.must_finish_before_compaction,
            "next_required_report_in_seconds": interval,
            "report_deadline_at": now + timedelta(seconds=interval * config.stale_factor),
            "stale": False,
            "critical_since": _critical_since(carried if previous else None, level, now),
            "compaction_unprepared": unprepared,
            "sources": record_mark(carried.sources, snapshot),
            "level_mismatches": carried.level_mismatches + (snapshot.context_budget_level is not level),
            "updated_at": now,
            # a compaction starts a new cycle: wrap-up and handoff-required are owed again before the next one
            **(
                {
                    "wrap_up_requested": False,
                    "handoff_required_sent": False,
                    "due_actions": [],
                    "master_actions": [],
                    "requested_actions": [],
                }
                if compacted
                else {}
            ),
        },
    )
    cause = snapshot.snapshot_id
    emits = [_context_event(state, ContextEventType.UPDATED, cause, "compaction" if compacted else "snapshot")]
    if compacted:
        emits += _action_emits(state, action_lifecycle.end_cycle(carried.master_actions, now))
    if previous is not None and previous.context_budget_level is not level:
        emits.append(_context_event(state, ContextEventType.LEVEL_CHANGED, cause, previous=previous))
    # the checklist reads the facts, the package and the last compaction, and of those a snapshot moves only the last
    same_inputs = previous is not None and state.last_compaction_at == previous.last_compaction_at
    state, derived = _derive(state, cause, now, config, state.wrap_up_checklist if same_inputs else None)
    if previous is None and slot.early_compact_request is not None:
        state, issued = _compact_now(state, slot.early_compact_request, now)
        derived += issued
    return Step(ThreadSlot(state=state), emits + derived, verdict)


def apply_work_fact(slot: ThreadSlot | None, event: WorkFactChanged, now: datetime, config: EngineConfig) -> Step:
    slot = slot or ThreadSlot()
    facts = slot.state.work_facts if slot.state else slot.early_work_facts
    known = next((f for f in facts if f.fact is event.fact), None)
    if known is not None and event.occurred_at <= known.changed_at:
        return UNCHANGED  # a repeat, or older than what we know: replays never undo a later change
    if known is None and not event.active:
        return UNCHANGED
    changed = WorkFactState(
        fact=event.fact, active=event.active, changed_at=event.occurred_at, detail=event.detail, files=event.files
    )
    updated = [*(f for f in facts if f.fact is not event.fact), changed]
    if slot.state is None:
        return Step(replaced(slot, {"early_work_facts": updated}))
    state = replaced(slot.state, {"work_facts": updated, "updated_at": now})
    if known is not None and known.active == event.active:
        return Step(ThreadSlot(state=_with_checklist(state)))  # newer details of an unchanged fact: nothing to announce
    state, derived = _derive(state, event.event_id, now, config)
    emits = [_context_event(state, ContextEventType.UPDATED, event.event_id, f"work_fact:{event.fact.value}")]
    return Step(ThreadSlot(state=state), emits + derived)


def apply_handoff(slot: ThreadSlot | None, package: HandoffPackage, now: datetime, config: EngineConfig) -> Step:
    slot = slot or ThreadSlot()
    current = slot.state.handoff if slot.state else slot.early_handoff
    admitted, assessment = handoff.admit(current, package)
    if slot.state is None:
        return Step(replaced(slot, {"early_handoff": admitted})) if admitted is not None else UNCHANGED
    decision = handoff.decision(package, assessment)
    if admitted is None:
        if decision is None or decision == slot.state.handoff_decision:
            return UNCHANGED
        return Step(ThreadSlot(state=replaced(slot.state, {"handoff_decision": decision, "updated_at": now})))
    cause = f"{package.handoff_package_id}:{admitted.package_status.value}"
    state, emits = _with_handoff(replaced(slot.state, {"handoff_decision": decision}), admitted, cause, now, config)
    return Step(ThreadSlot(state=state), emits)


def apply_ack(slot: ThreadSlot | None, command: AlertCommand, now: datetime) -> Step:
    if slot is None or slot.state is None:
        return UNCHANGED
    open_alerts, acked = alerts.acknowledge(slot.state.open_alerts, command.alert_id, now)
    if acked is None:
        return UNCHANGED
    state = replaced(slot.state, {"open_alerts": open_alerts, "updated_at": now})
    return Step(ThreadSlot(state=state), [Emit(ALERTS, acked.alert_id, acked)])


def apply_action_command(
    slot: ThreadSlot | None, command: MasterActionCommand, now: datetime, config: EngineConfig
) -> Step:
    """A worker or the master acknowledges or completes one of the thread's open actions, or the master asks for one
    now (a handoff): it is due for the rest of the cycle, and clears as the level's own would."""
    if slot is None or slot.state is None:
        return UNCHANGED
    if command.command is MasterActionCommandKind.REQUEST:
        return _requested(slot.state, command, now, config)
    items, change = action_lifecycle.apply_command(slot.state.master_actions, command, now)
    if change is None:
        return UNCHANGED
    state = replaced(slot.state, {"master_actions": items, "updated_at": now})
    return Step(ThreadSlot(state=state), _action_emits(state, [change]))


def apply_compact_request(slot: ThreadSlot | None, event: CompactRequested, now: datetime) -> Step:
    """A manual compaction was requested (seed 000 `compact_now`): an action issued to the thread's worker, open
    until the thread's compaction is observed. For a thread with no state yet, the request waits in the slot for the
    thread's first snapshot (the newest one: as with a state, a newer request supersedes an open one)."""
    slot = slot or ThreadSlot()
    if slot.state is None:
        if slot.early_compact_request == event:
            return UNCHANGED
        return Step(replaced(slot, {"early_compact_request": event}))
    state, emits = _compact_now(slot.state, event, now)
    return Step(ThreadSlot(state=state), emits) if emits else UNCHANGED


def _compact_now(state: ThreadState, event: CompactRequested, now: datetime) -> tuple[ThreadState, list[Emit]]:
    items, changes = action_lifecycle.request_manual(
        state.master_actions,
        MasterAction.COMPACT_NOW,
        level=state.context_budget_level,
        thread_id=state.thread_id,
        cause=event.event_id,
        requested_by=event.requested_by,
        now=now,
    )
    if not changes:
        return state, []
    state = replaced(state, {"master_actions": items, "updated_at": now})
    return state, _action_emits(state, changes)


def apply_worker_move(slot: ThreadSlot | None, event: ThreadWorkerMoved, now: datetime) -> Step:
    """An operator moved the thread (`refusal` admitted it: the thread is still `from_worker_id`'s): the new worker's
    reports count from now on, judged afresh (its versions need not follow the old worker's), and the move is in the
    thread's history as an update."""
    if slot is None or slot.state is None:
        return UNCHANGED
    state = replaced(slot.state, {"worker_id": event.to_worker_id, "sources": [], "updated_at": now})
    moved = _context_event(state, ContextEventType.UPDATED, event.event_id, "worker_moved")
    return Step(ThreadSlot(state=state), [moved])


def _requested(state: ThreadState, command: MasterActionCommand, now: datetime, config: EngineConfig) -> Step:
    items, change = action_lifecycle.request(state.master_actions, command, state.context_budget_level, now)
    if change is None:
        return UNCHANGED
    requested = [
        *state.requested_actions,
        *([] if change.item.action in state.requested_actions else [change.item.action]),
    ]
    state = replaced(state, {"master_actions": items, "requested_actions": requested, "updated_at": now})
    emits = _action_emits(state, [change])
    state, derived = _derive(state, command.action_id, now, config, state.wrap_up_checklist)
    return Step(ThreadSlot(state=state), emits + derived)


def apply_compaction_started(
    slot: ThreadSlot | None, event: CompactionStarted, now: datetime, config: EngineConfig
) -> Step:
    """A compaction begins: without a ready package for the current cycle, handoff_missing opens (spec 9.5), whatever
    wrap-up was requested. A start at or before the last compaction the snapshots reported is that compaction, whose
    snapshot came first and was judged then."""
    if slot is None or slot.state is None:
        return UNCHANGED
    state = slot.state
    counted = state.last_compaction_at is not None and event.occurred_at <= state.last_compaction_at
    if counted or handoff.thread_ready(state) or state.compaction_unprepared:
        return UNCHANGED
    state = replaced(state, {"compaction_unprepared": True, "updated_at": now})
    state, derived = _derive(state, event.event_id, now, config, state.wrap_up_checklist)
    return Step(ThreadSlot(state=state), derived)


def tick(slot: ThreadSlot, now: datetime, config: EngineConfig) -> Step:
    """Time-driven changes: a missed report deadline (stale), an expired package, grace periods and horizons.

    They are applied at the latest of the thread's deadlines that `now` has passed, not at `now`: the outputs then
    carry the time that fired them, and a timer run again after a restart publishes the very same records."""
    state = slot.state
    if state is None:
        return UNCHANGED
    passed = [deadline for deadline in _deadlines(state, config) if deadline <= now]
    if not passed:
        return UNCHANGED
    at = max(*passed, state.updated_at)
    cause = f"{state.snapshot_id}:tick"
    emits: list[Emit] = []
    if not state.stale and at >= state.report_deadline_at:
        state = replaced(state, {"stale": True, "updated_at": at})
        emits.append(_context_event(state, ContextEventType.UPDATED, f"{state.snapshot_id}:stale", "stale"))
    expired = handoff.expire(state.handoff, at, config.handoff_ttl) if state.handoff is not None else None
    if expired is not None:
        state, derived = _with_handoff(state, expired, f"{expired.handoff_package_id}:expired", at, config)
    else:
        state, derived = _derive(state, cause, at, config, state.wrap_up_checklist)
    emits += derived
    return Step(ThreadSlot(state=state), emits) if emits or expired else UNCHANGED


def next_deadline(slot: ThreadSlot, after: datetime | None, config: EngineConfig) -> datetime | None:
    """The first of the thread's deadlines after `after` (with None, the first of all, passed or not): what `tick`
    does depends only on which deadlines have passed, so before that instant it changes nothing."""
    if slot.state is None:
        return None
    return min((d for d in _deadlines(slot.state, config) if after is None or d > after), default=None)


def _deadlines(state: ThreadState, config: EngineConfig) -> list[datetime]:
    """The instants at which something of the thread turns by time alone (see `_derive`)."""
    deadlines = [] if state.stale else [state.report_deadline_at]
    if state.handoff is not None and handoff.STATUS_ORDER[state.handoff.package_status] < 2:
        deadlines.append(state.handoff.created_at + config.handoff_ttl)
    if state.critical_since is not None:
        deadlines.append(state.critical_since + config.handoff_missing_grace)
    if state.compaction_expected_at is not None:
        deadlines.append(state.compaction_expected_at - config.risk_horizon)
    return deadlines


# -- derivation -----------------------------------------------------------------------------------------------------
def _derive(
    state: ThreadState, cause: str, now: datetime, config: EngineConfig, checklist: WrapUpChecklist | None = None
) -> tuple[ThreadState, list[Emit]]:
    """Every derived value is computed from the raw facts `state` holds, which no step here changes: the changes are
    collected and applied in one copy at the end. `checklist`: the state's own, when the caller changed none of what
    it is built from (every state the fold writes carries its current checklist); None builds it."""
    emits: list[Emit] = []
    update: dict[str, object] = {}
    must_finish = state.worker_must_finish or any(f.active for f in state.work_facts)
    ready = handoff.thread_ready(state)
    level = state.context_budget_level
    imminent = (
        must_finish
        and state.compaction_expected_at is not None
        and state.compaction_expected_at - now <= config.risk_horizon
    )
    risk = not ready and (level is ContextBudgetLevel.CRITICAL or imminent)
    if must_finish != state.must_finish_before_compaction:
        update["must_finish_before_compaction"] = must_finish

    if risk != state.compaction_risk_open:
        update["compaction_risk_open"] = risk
        kind = ContextEventType.COMPACTION_RISK_OPENED if risk else ContextEventType.COMPACTION_RISK_RESOLVED
        reason = "handoff_ready" if not risk and ready else ("critical" if level is ContextBudgetLevel.CRITICAL else "")
        emits.append(_context_event(state, kind, cause, reason or ("imminent" if risk else "recovered")))

    overdue = (
        level is ContextBudgetLevel.CRITICAL
        and must_finish
        and state.critical_since is not None
        and now - state.critical_since >= config.handoff_missing_grace
    )
    holding = {
        *([alerts.LEVEL_ALERT[level]] if level in alerts.LEVEL_ALERT else []),
        *([AlertType.COMPACTION_RISK] if risk else []),
        *([AlertType.HANDOFF_MISSING] if not ready and (overdue or state.compaction_unprepared) else []),
    }
    open_alerts, transitions, sequence = alerts.reconcile(
        state.open_alerts,
        holding,
        thread_id=state.thread_id,
        project_id=state.project_id,
        sequence=state.alert_sequence,
        now=now,
    )
    if transitions:
        update |= {"open_alerts": open_alerts, "alert_sequence": sequence}
        emits += [Emit(ALERTS, t.alert_id, t) for t in transitions]

    if checklist is None:
        checklist = wrap_up_checklist(state)
        if checklist != state.wrap_up_checklist:
            update["wrap_up_checklist"] = checklist
    due = actions_for_level(level)
    due += [action for action in state.requested_actions if action not in due]
    if due != state.due_actions:
        update["due_actions"] = due
        update["wrap_up_requested"] = state.wrap_up_requested or bool(WRAP_UP_ACTIONS & set(due))
    items, changes = action_lifecycle.reconcile(
        state.master_actions, due, ready=ready, level=level, thread_id=state.thread_id, cause=cause, now=now
    )
    if changes:
        update["master_actions"] = items
        emits += _action_emits(state, changes, checklist)

    needs_handoff = level in (ContextBudgetLevel.URGENT, ContextBudgetLevel.CRITICAL) or (
        MasterAction.PREPARE_HANDOFF in due
    )
    if needs_handoff and not ready and not state.handoff_required_sent:
        update["handoff_required_sent"] = True
        emits.append(
            Emit(
                CLIENT_EVENTS,
                state.project_id,
                ThreadHandoffRequired(
                    event_id=derived_id(state.thread_id, cause, "handoff_required"),
                    occurred_at=now,
                    project_id=state.project_id,
                    thread_id=state.thread_id,
                    context_budget_level=level,
                    reason=f"level {level.value}, no ready handoff package",
                ),
            )
        )
    return (replaced(state, update) if update else state), emits


def _with_handoff(
    state: ThreadState, package: HandoffPackage, cause: str, now: datetime, config: EngineConfig
) -> tuple[ThreadState, list[Emit]]:
    was_ready = handoff.thread_ready(state)
    state = replaced(state, {"handoff": package, "updated_at": now})
    emits: list[Emit] = []
    if handoff.thread_ready(state) and not was_ready:
        state = replaced(state, {"compaction_unprepared": False})
        emits.append(
            Emit(
                CLIENT_EVENTS,
                state.project_id,
                ThreadHandoffReady(
                    event_id=derived_id(state.thread_id, cause, "handoff_ready"),
                    occurred_at=now,
                    project_id=state.project_id,
                    thread_id=state.thread_id,
                    handoff_package_id=package.handoff_package_id,
                ),
            )
        )
    state, derived = _derive(state, cause, now, config)
    return state, emits + derived


def _with_checklist(state: ThreadState) -> ThreadState:
    """The state with its current checklist: facts and packages change it whether or not the level moves."""
    checklist = wrap_up_checklist(state)
    return state if checklist == state.wrap_up_checklist else replaced(state, {"wrap_up_checklist": checklist})


def _critical_since(previous: ThreadState | None, level: ContextBudgetLevel, now: datetime) -> datetime | None:
    if level is not ContextBudgetLevel.CRITICAL:
        return None
    if previous is not None and previous.critical_since is not None:
        return previous.critical_since
    return now


def _first_state(slot: ThreadSlot, snapshot: ThreadContextSnapshot, now: datetime) -> ThreadState:
    """A new thread's state before its first snapshot is applied, carrying what arrived before that snapshot."""
    return ThreadState(
        thread_id=snapshot.thread_id,
        project_id=snapshot.project_id,
        node_id=snapshot.node_id,
        worker_id=snapshot.worker_id,
        source_kind=snapshot.source_kind,
        snapshot_id=snapshot.snapshot_id,
        snapshot_version=snapshot.snapshot_version,
        captured_at=snapshot.captured_at,
        context_budget_remaining_pct=snapshot.context_budget_remaining_pct,
        reported_level=snapshot.context_budget_level,
        context_budget_level=snapshot.context_budget_level,
        next_required_report_in_seconds=1,
        report_deadline_at=now,
        updated_at=now,
        work_facts=slot.early_work_facts,
        handoff=slot.early_handoff,
    )


_EVENT_SUFFIX = {kind: kind.value.rsplit(".", 1)[-1] for kind in ContextEventType}
"""The last part of each event type, for event ids (an enum's `.value` is a slow descriptor on the hot path)."""


def _context_event(
    state: ThreadState, kind: ContextEventType, cause: str, reason: str = "", previous: ThreadState | None = None
) -> Emit:
    suffix = _EVENT_SUFFIX[kind]
    return Emit(
        CONTEXT_EVENTS,
        state.thread_id,
        ContextEvent(
            event_id=derived_id(state.thread_id, cause, suffix),
            event_type=kind,
            thread_id=state.thread_id,
            project_id=state.project_id,
            occurred_at=state.updated_at,
            context_budget_remaining_pct=state.context_budget_remaining_pct,
            context_budget_level=state.context_budget_level,
            previous_level=previous.context_budget_level if previous else None,
            snapshot_id=state.snapshot_id,
            reason=reason,
        ),
    )


def _action_emits(
    state: ThreadState, changes: list[action_lifecycle.Change], checklist: WrapUpChecklist | None = None
) -> list[Emit]:
    """Each change as a version of its record, and each issue also as the client event a master can listen for.
    `checklist`: the state's current one, when the caller has it."""
    if not changes:
        return []
    checklist = wrap_up_checklist(state) if checklist is None else checklist
    emits: list[Emit] = []
    for change in changes:
        item = change.item
        emits.append(
            Emit(
                MASTER_ACTIONS,
                state.thread_id,
                action_lifecycle.record(change, state.thread_id, state.project_id, checklist),
            )
        )
        if item.state is MasterActionState.ISSUED:
            emits.append(
                Emit(
                    CLIENT_EVENTS,
                    state.project_id,
                    ThreadMasterActionIssued(
                        event_id=derived_id(item.action_id, "issued"),
                        occurred_at=item.issued_at,
                        project_id=state.project_id,
                        thread_id=state.thread_id,
                        action_id=item.action_id,
                        action=item.action,
                        context_budget_level=item.context_budget_level,
                    ),
                )
            )
    return emits
