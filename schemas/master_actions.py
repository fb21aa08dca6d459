"""Master actions with a lifecycle: the engine's record of each one it issued, and the commands that move one along."""

from __future__ import annotations

from pydantic import Field

from schemas.base import Id, Record, ShortText, Timestamp
from schemas.enums import ContextBudgetLevel, MasterAction, MasterActionCommandKind, MasterActionState

REQUESTABLE_ACTIONS = frozenset({MasterAction.PREPARE_HANDOFF})
"""What the master may ask for ahead of the level (the rest follow from the level alone)."""

OPEN_ACTION_STATES = frozenset({MasterActionState.ISSUED, MasterActionState.ACKNOWLEDGED})


class MasterActionItem(Record):
    """One action the engine issued in the thread's current compaction cycle, and where it stands.

    Kept in the thread's state while its action is due, done ones too, so that a done action is not issued again
    until the level stops asking for it or the thread compacts."""

    action_id: Id
    action: MasterAction
    state: MasterActionState
    context_budget_level: ContextBudgetLevel = Field(description="The level that issued it.")
    issued_at: Timestamp
    state_changed_at: Timestamp

    @property
    def open(self) -> bool:
        return self.state in OPEN_ACTION_STATES


class MasterActionCommand(Record):
    """A record on `master-action-commands` [thread_id]: a worker or the master acknowledges or completes an action.

    It names the action's thread, so it lands on the partition that owns the thread's state."""

    action_id: Id
    thread_id: Id
    command: MasterActionCommandKind
    issued_by: Id
    issued_at: Timestamp
    note: ShortText = ""
    action: MasterAction | None = Field(default=None, description="For `request`: the action asked for.")
