"""What the engine will make of a posted handoff package (spec 3.3), so the answer says it instead of a silent 202,
and what consuming one into a relay thread gives.

The engine's own verdict (core.handoff.assess) run against the thread's current package as the thread
book knows it: kept as sent, kept as a draft (ready without its summary), or dropped (older than the current
package, or a step back in its lifecycle), with the engine's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core import handoff
from schemas import HandoffPackage, PackageStatus
from schemas.copies import replaced


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


class ConsumeRefused(Exception):
    """409: the package cannot be consumed into that thread (the message says why)."""


@dataclass(frozen=True)
class Consume:
    package: HandoffPackage
    """The consumed version to answer with."""
    new: bool
    """Publish it: the first consume of the package. False: a repeat, answered with the version already made."""


def consume(latest: HandoffPackage, to_thread_id: str, now: datetime) -> Consume:
    """Consuming `latest` (the package's newest known version) into `to_thread_id`: exclusive, the first consume
    wins and a package continues in one thread only; idempotent, a repeat answers the same `consumed_at`."""
    if latest.package_status is PackageStatus.CONSUMED:
        if latest.to_thread_id == to_thread_id:
            return Consume(latest, new=False)
        raise ConsumeRefused(
            f"the package is already consumed into thread {latest.to_thread_id}; a package continues in one thread"
        )
    if latest.package_status is not PackageStatus.READY:
        raise ConsumeRefused(f"the package is {latest.package_status.value}, only a ready one can be consumed")
    update = {
        "package_status": PackageStatus.CONSUMED,
        "to_thread_id": to_thread_id,
        "consumed_at": max(now, latest.created_at),
    }
    return Consume(replaced(latest, update), new=True)
