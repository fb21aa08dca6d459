"""Handoff package lifecycle (spec 3.3): draft -> ready -> consumed, expired by TTL; ready needs its checklist."""

from __future__ import annotations

from datetime import datetime, timedelta

from schemas import HandoffPackage, PackageStatus

STATUS_ORDER = {PackageStatus.DRAFT: 0, PackageStatus.READY: 1, PackageStatus.CONSUMED: 2, PackageStatus.EXPIRED: 2}
CHECKLIST_FIELDS = ("summary_text", "critical_files", "critical_commands", "critical_tests")
"""What a package must carry to be ready: the summary and the spec 8.3 essentials (files, commands, tests)."""


def missing_checklist_fields(package: HandoffPackage) -> list[str]:
    return [name for name in CHECKLIST_FIELDS if not getattr(package, name)]


def admit(current: HandoffPackage | None, incoming: HandoffPackage) -> HandoffPackage | None:
    """The package to keep after `incoming` arrives, or None when it changes nothing.

    A new package replaces a finished one (consumed/expired) or an older one; a version of the same package only moves
    its lifecycle forward. A package that claims ready without its checklist is kept as a draft.
    """
    if missing_checklist_fields(incoming) and incoming.package_status is PackageStatus.READY:
        incoming = incoming.model_copy(update={"package_status": PackageStatus.DRAFT, "ready_at": None})
    if current is None:
        return incoming
    if incoming.handoff_package_id != current.handoff_package_id:
        finished = STATUS_ORDER[current.package_status] == 2
        return incoming if finished or incoming.created_at > current.created_at else None
    if STATUS_ORDER[incoming.package_status] <= STATUS_ORDER[current.package_status] and incoming == current:
        return None
    return incoming if STATUS_ORDER[incoming.package_status] >= STATUS_ORDER[current.package_status] else None


def expire(package: HandoffPackage, now: datetime, ttl: timedelta) -> HandoffPackage | None:
    """The expired package when its TTL ran out before it was consumed, else None."""
    if STATUS_ORDER[package.package_status] == 2 or now < package.created_at + ttl:
        return None
    return package.model_copy(update={"package_status": PackageStatus.EXPIRED})
