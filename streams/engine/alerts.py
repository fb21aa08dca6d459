"""The alert state machine (spec 3.4): at most one open alert per (thread, type), each transition a record.

The engine says which alert conditions hold; `reconcile` opens what is newly true, resolves what no longer is, and
leaves the rest (opened or acked) alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from core.ids import derived_id
from schemas import AlertStatus, AlertType, ContextAlert, ContextBudgetLevel
from schemas.copies import replaced

LEVEL_ALERT = {
    ContextBudgetLevel.WATCH: AlertType.CONTEXT_WATCH,
    ContextBudgetLevel.URGENT: AlertType.CONTEXT_URGENT,
    ContextBudgetLevel.CRITICAL: AlertType.CONTEXT_CRITICAL,
}


def alert_id(thread_id: str, alert_type: AlertType, sequence: int) -> str:
    return derived_id(thread_id, alert_type.value, str(sequence))


_DECLARED = {alert_type: i for i, alert_type in enumerate(AlertType)}
"""Alerts that open together open in declaration order (their ids take consecutive sequence numbers)."""


def reconcile(
    open_alerts: list[ContextAlert],
    holding: Iterable[AlertType],
    *,
    thread_id: str,
    project_id: str,
    sequence: int,
    now: datetime,
) -> tuple[list[ContextAlert], list[ContextAlert], int]:
    """Returns (alerts still open, transitions to publish, next sequence)."""
    wanted = set(holding)
    kept: list[ContextAlert] = []
    transitions: list[ContextAlert] = []
    for alert in open_alerts:
        if alert.alert_type in wanted:
            kept.append(alert)
        else:
            transitions.append(replaced(alert, {"alert_status": AlertStatus.RESOLVED, "resolved_at": now}))
    have = {alert.alert_type for alert in kept}
    for alert_type in sorted(wanted - have, key=_DECLARED.__getitem__):
        sequence += 1
        opened = ContextAlert(
            alert_id=alert_id(thread_id, alert_type, sequence),
            thread_id=thread_id,
            project_id=project_id,
            alert_type=alert_type,
            alert_status=AlertStatus.OPENED,
            opened_at=now,
        )
        kept.append(opened)
        transitions.append(opened)
    return kept, transitions, sequence


def acknowledge(
    open_alerts: list[ContextAlert], target: str, now: datetime
) -> tuple[list[ContextAlert], ContextAlert | None]:
    """Ack an open alert; an unknown, resolved or already acked alert changes nothing (returns None)."""
    for index, alert in enumerate(open_alerts):
        if alert.alert_id == target and alert.alert_status is AlertStatus.OPENED:
            acked = replaced(alert, {"alert_status": AlertStatus.ACKED, "acked_at": now})
            return [*open_alerts[:index], acked, *open_alerts[index + 1 :]], acked
    return open_alerts, None
