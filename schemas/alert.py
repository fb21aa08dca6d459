"""Context alerts (spec 3.4) and the commands that acknowledge them."""

from __future__ import annotations

from pydantic import Field, model_validator

from schemas.base import Id, Record, ShortText, Timestamp
from schemas.enums import AlertCommandKind, AlertStatus, AlertType


class ContextAlert(Record):
    """One alert and its current status; every transition is published as a new version of this record."""

    alert_id: Id
    thread_id: Id
    project_id: Id
    alert_type: AlertType
    alert_status: AlertStatus
    opened_at: Timestamp
    acked_at: Timestamp | None = Field(default=None, description="When it was acknowledged (not in the spec minimum).")
    resolved_at: Timestamp | None = None

    @model_validator(mode="after")
    def _status_matches_timestamps(self) -> ContextAlert:
        if self.alert_status is AlertStatus.RESOLVED and self.resolved_at is None:
            raise ValueError("a resolved alert needs resolved_at")
        if self.alert_status is not AlertStatus.RESOLVED and self.resolved_at is not None:
            raise ValueError(f"an {self.alert_status} alert cannot have resolved_at")
        if self.alert_status is AlertStatus.ACKED and self.acked_at is None:
            raise ValueError("an acked alert needs acked_at")
        return self


class AlertCommand(Record):
    """A record on `alert-commands` [alert_id]: someone acknowledges an alert.

    It names the alert's thread too, so the engine can route it to the partition that owns that thread's state.
    """

    alert_id: Id
    thread_id: Id
    command: AlertCommandKind
    issued_by: Id
    issued_at: Timestamp
    note: ShortText = ""
