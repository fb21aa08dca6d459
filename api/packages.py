"""What the engine will make of a posted handoff package (spec 3.3), so the answer says it instead of a silent 202.

The engine's own lifecycle rule (streams.engine.handoff.admit) run against the thread's current package as the
thread book knows it: kept as sent, kept as a draft (ready without its checklist), or dropped (older than the
current package, or a step back in its lifecycle).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas import HandoffPackage, PackageStatus
from streams.engine import handoff


@dataclass(frozen=True)
class PackageOutcome:
    kept: bool
    """The engine will keep this version (as `status`); false: it changes nothing."""
    status: PackageStatus
    reason: str | None = None


def package_outcome(current: HandoffPackage | None, incoming: HandoffPackage) -> PackageOutcome:
    admitted = handoff.admit(current, incoming)
    if admitted is None:
        if current is None or incoming == current:  # admit keeps any package of a thread without one
            return PackageOutcome(True, incoming.package_status, "already the thread's current package")
        if incoming.handoff_package_id != current.handoff_package_id:
            reason = f"not newer than the thread's current package {current.handoff_package_id}"
        else:
            reason = f"the package is already {current.package_status.value}: it does not go back"
        return PackageOutcome(False, current.package_status, reason)
    if admitted.package_status is not incoming.package_status:
        missing = ", ".join(handoff.missing_checklist_fields(incoming))
        return PackageOutcome(
            True, admitted.package_status, f"kept as {admitted.package_status.value}: ready needs {missing}"
        )
    return PackageOutcome(True, admitted.package_status)
