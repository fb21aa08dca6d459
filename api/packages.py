"""What the engine will make of a posted handoff package (spec 3.3), so the answer says it instead of a silent 202.

The engine's own verdict (core.handoff.assess) run against the thread's current package as the thread
book knows it: kept as sent, kept as a draft (ready without its summary), or dropped (older than the current
package, or a step back in its lifecycle), with the engine's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from core import handoff
from schemas import HandoffPackage, PackageStatus


@dataclass(frozen=True)
class PackageOutcome:
    kept: bool
    """The engine will keep this version (as `status`); false: it changes nothing."""
    status: PackageStatus
    reason: str | None = None


def package_outcome(current: HandoffPackage | None, incoming: HandoffPackage) -> PackageOutcome:
    assessment = handoff.assess(incoming, current)
    if assessment.status is None:
        if current is None or assessment.as_claimed:  # a repeat of the thread's current package
            return PackageOutcome(True, incoming.package_status, "already the thread's current package")
        return PackageOutcome(False, current.package_status, assessment.reason)
    return PackageOutcome(True, assessment.status, assessment.reason or None)
