"""The lifecycle of the master actions the engine issues: issued -> acknowledged -> done, or superseded.

An action is issued once per compaction cycle when its level asks for it, and clears when it is satisfied (a ready
package for the current cycle does `prepare_handoff`), when a worker or the master says it is done, or when it stops
being due (the level moved on) or the thread compacts (superseded). A manual `compact_now` (seed 000) is issued by a
request instead of a level: the level never supersedes it, the thread's compaction completes it, and a newer request
supersedes it. Pure functions over the thread's items; the fold turns each change into a `MasterActionRecord` version
on `master-actions`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from core.ids import derived_id
from schemas import (
    ContextBudgetLevel,
    MasterAction,
    MasterActionCommand,
    MasterActionCommandKind,
    MasterActionItem,
    MasterActionRecord,
    MasterActionState,
    WrapUpChecklist,
)
from schemas.copies import replaced
from schemas.master_actions import REQUESTABLE_ACTIONS

ENGINE = "engine"
SATISFIED_BY_READY_PACKAGE = frozenset({MasterAction.PREPARE_HANDOFF})
"""What a ready package of the current cycle accomplishes by itself existing."""
MANUAL = frozenset({MasterAction.COMPACT_NOW})
"""Actions only a manual request issues, never a level: the level's reconciling leaves them alone."""
DONE_BY_COMPACTION = frozenset({MasterAction.COMPACT_NOW})
"""What the thread's compaction accomplishes: a compaction observed completes them instead of superseding them."""

_State = MasterActionState
_COMMAND_MOVES: dict[MasterActionCommandKind, dict[MasterActionState, MasterActionState]] = {
    MasterActionCommandKind.ACK: {_State.ISSUED: _State.ACKNOWLEDGED},
    MasterActionCommandKind.DONE: {_State.ISSUED: _State.DONE, _State.ACKNOWLEDGED: _State.DONE},
}
"""Commands only move an action forward: a repeat, or an ack after done, changes nothing."""


@dataclass(frozen=True)
class Change:
    """An action reached a new state: the record to publish."""

    item: MasterActionItem
    changed_by: str
    reason: str


def reconcile(
    items: Sequence[MasterActionItem],
    due: Sequence[MasterAction],
    *,
    ready: bool,
    level: ContextBudgetLevel,
    thread_id: str,
    cause: str,
    now: datetime,
) -> tuple[list[MasterActionItem], list[Change]]:
    """The items once `due` is what the level asks: open ones no longer due are superseded, due ones not issued yet in
    this cycle are issued (ids from the cause), and what a ready package satisfies is done."""
    changes: list[Change] = []
    kept: list[MasterActionItem] = []
    for item in items:
        if item.action in due or item.action in MANUAL:
            kept.append(item)
        elif item.open:
            changes.append(Change(_moved(item, _State.SUPERSEDED, now), ENGINE, "level_changed"))
    issued = {item.action for item in kept}
    for action in due:
        if action not in issued:
            item = MasterActionItem(
                action_id=derived_id(thread_id, cause, action.value),
                action=action,
                state=_State.ISSUED,
                context_budget_level=level,
                issued_at=now,
                state_changed_at=now,
            )
            kept.append(item)
            changes.append(Change(item, ENGINE, f"level {level.value}"))
    if ready:
        for index, item in enumerate(kept):
            if item.open and item.action in SATISFIED_BY_READY_PACKAGE:
                kept[index] = _moved(item, _State.DONE, now)
                changes.append(Change(kept[index], ENGINE, "handoff_ready"))
    kept.sort(key=lambda item: due.index(item.action) if item.action in due else len(due))
    return kept, changes


def request_manual(
    items: Sequence[MasterActionItem],
    action: MasterAction,
    *,
    level: ContextBudgetLevel,
    thread_id: str,
    cause: str,
    requested_by: str,
    now: datetime,
) -> tuple[list[MasterActionItem], list[Change]]:
    """A manual action issued (its id from the request's cause); an open one of the same action it replaces is
    superseded. A repeat of the same request changes nothing."""
    action_id = derived_id(thread_id, action.value, cause)
    held = next((item for item in items if item.action is action), None)
    if held is not None and held.action_id == action_id:
        return list(items), []
    changes = [Change(_moved(held, _State.SUPERSEDED, now), ENGINE, "newer_request")] if held and held.open else []
    issued = MasterActionItem(
        action_id=action_id,
        action=action,
        state=_State.ISSUED,
        context_budget_level=level,
        issued_at=now,
        state_changed_at=now,
    )
    kept = [item for item in items if item.action is not action]
    return [*kept, issued], [*changes, Change(issued, ENGINE, f"requested by {requested_by}")]


def end_cycle(items: Sequence[MasterActionItem], now: datetime) -> list[Change]:
    """The thread compacted: the cycle the open items belonged to is over. What the compaction accomplishes is done,
    the rest superseded."""
    return [
        Change(_moved(item, _State.DONE, now), ENGINE, "compacted")
        if item.action in DONE_BY_COMPACTION
        else Change(_moved(item, _State.SUPERSEDED, now), ENGINE, "compacted")
        for item in items
        if item.open
    ]


def apply_command(
    items: Sequence[MasterActionItem], command: MasterActionCommand, now: datetime
) -> tuple[list[MasterActionItem], Change | None]:
    """The items after an ack or done; None when it names no open item of this cycle or would not move it forward."""
    for index, item in enumerate(items):
        if item.action_id != command.action_id:
            continue
        target = _COMMAND_MOVES[command.command].get(item.state)
        if target is None:
            return list(items), None
        moved = _moved(item, target, now)
        return [*items[:index], moved, *items[index + 1 :]], Change(moved, command.issued_by, command.command.value)
    return list(items), None


def request(
    items: Sequence[MasterActionItem], command: MasterActionCommand, level: ContextBudgetLevel, now: datetime
) -> tuple[list[MasterActionItem], Change | None]:
    """The items once the master asked for `command.action` now, issued under the command's id; None when it is not
    requestable or already open in this cycle. A finished one of this cycle (done by a package that has since
    expired or been consumed) gives way to the new request."""
    action = command.action
    if action is None or action not in REQUESTABLE_ACTIONS or any(i.action is action and i.open for i in items):
        return list(items), None
    item = MasterActionItem(
        action_id=command.action_id,
        action=action,
        state=_State.ISSUED,
        context_budget_level=level,
        issued_at=now,
        state_changed_at=now,
    )
    kept = [existing for existing in items if existing.action is not action]
    return [*kept, item], Change(item, command.issued_by, command.note or "requested")


def still_owed(
    due: Sequence[MasterAction], items: Sequence[MasterActionItem]
) -> tuple[list[MasterAction], list[MasterActionItem]]:
    """Of the level's actions, those not done in this cycle, and the already-issued open items among them; an open
    requested action (a manual compaction) is owed whatever the level."""
    done = {item.action for item in items if item.state is _State.DONE}
    requested = [item for item in items if item.open and item.action in MANUAL and item.action not in due]
    owed = [a for a in due if a not in done] + [item.action for item in requested]
    return owed, [item for item in items if item.open and (item.action in due or item.action in MANUAL)]


def record(change: Change, thread_id: str, project_id: str, checklist: WrapUpChecklist) -> MasterActionRecord:
    item = change.item
    return MasterActionRecord(
        action_id=item.action_id,
        thread_id=thread_id,
        project_id=project_id,
        context_budget_level=item.context_budget_level,
        actions=[item.action],
        checklist=checklist,
        reason="manual request" if item.action in MANUAL else f"level {item.context_budget_level.value}",
        issued_at=item.issued_at,
        state=item.state,
        state_changed_at=item.state_changed_at,
        changed_by=change.changed_by,
        state_reason=change.reason,
    )


def _moved(item: MasterActionItem, state: MasterActionState, now: datetime) -> MasterActionItem:
    return replaced(item, {"state": state, "state_changed_at": now})
