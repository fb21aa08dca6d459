"""Handoff readiness and the package lifecycle (spec 3.3, 8.3): the one definition the engine, the project fold, the
projection, the API and the reporter share. Pure: it knows neither Faust nor ClickHouse.

A package is ready when it says so and carries its summary, and it was made for the thread's current cycle (a
compaction uses up every package made before it). Spec 8.3 asks the worker to fill the rest "as far as it can"
(尽量补齐): files, commands and tests are best effort, since a design or research thread has none of them.

Lifecycle: draft -> ready -> consumed, expired by TTL. `assess` says what the engine does with an incoming package and
why, so the API can answer with the same verdict the engine will reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas import HandoffPackage, PackageStatus
from schemas.state import HandoffDecision, ThreadState

STATUS_ORDER = {PackageStatus.DRAFT: 0, PackageStatus.READY: 1, PackageStatus.CONSUMED: 2, PackageStatus.EXPIRED: 2}
REQUIRED_FOR_READY = ("summary_text",)
"""What a ready package must carry: without its summary the next thread cannot continue the work."""
BEST_EFFORT_FIELDS = ("critical_files", "critical_commands", "critical_tests")
"""The spec 8.3 essentials a worker fills when the thread has them; their absence does not demote a package."""
FACTS_ONLY_MARK = "[facts only: the agent could not be asked; summary from its latest messages]"
"""Heads the summary of a package the relay made without the agent's part, so the next thread and the master can
tell: the relay writes it (reporter.relay.assembly), and looks for it before replacing a package; the analytics views
of sinks migration 10 count packages by it (a released migration, so changing the mark is a new migration)."""


@dataclass(frozen=True)
class Assessment:
    """What the engine does with an incoming package."""

    status: PackageStatus | None
    """The status it is kept with; None when it is not kept (rejected, or a repeat that changes nothing)."""
    reason: str = ""
    """Why it is not kept as claimed (demoted or rejected); empty when it is, or when it is a mere repeat."""

    @property
    def as_claimed(self) -> bool:
        return not self.reason


def missing_for_ready(package: HandoffPackage) -> list[str]:
    return [name for name in REQUIRED_FOR_READY if not getattr(package, name).strip()]


def assess(incoming: HandoffPackage, current: HandoffPackage | None = None) -> Assessment:
    """The verdict on `incoming` when the thread's current package is `current` (None: the thread has none yet).

    A package that claims ready without its summary is kept as a draft (demoted). A new package replaces a finished
    one (consumed/expired) or an older one; a version of the same package only moves its lifecycle forward, and a
    finished package does not change any more: anything else is rejected and the current package stays.
    """
    status, notes = incoming.package_status, []
    if status is PackageStatus.READY and (missing := missing_for_ready(incoming)):
        status = PackageStatus.DRAFT
        notes.append(f"demoted to draft: a ready package needs {', '.join(missing)}")
    if current is not None:
        if incoming.handoff_package_id != current.handoff_package_id:
            finished = STATUS_ORDER[current.package_status] == 2
            if not finished and incoming.created_at <= current.created_at:
                notes.append(f"rejected: not newer than the current package {current.handoff_package_id}")
                return Assessment(None, "; ".join(notes))
        elif _kept(incoming, status) == current:
            return Assessment(None)  # a repeat: nothing to do, nothing to say
        elif STATUS_ORDER[current.package_status] == 2:
            # The first consume (or the expiry) the engine applies is final: a later consume into another thread,
            # or a repeat with another `consumed_at`, cannot take the package a second time.
            notes.append(f"rejected: the package is already {_finished(current)}, it is final")
            return Assessment(None, "; ".join(notes))
        elif STATUS_ORDER[status] < STATUS_ORDER[current.package_status]:
            notes.append(f"rejected: the package is already {current.package_status.value}, it cannot go back")
            return Assessment(None, "; ".join(notes))
    return Assessment(status, "; ".join(notes))


def admit(current: HandoffPackage | None, incoming: HandoffPackage) -> tuple[HandoffPackage | None, Assessment]:
    """The package to keep after `incoming` arrives (None: the current one stays) and the verdict behind it."""
    assessment = assess(incoming, current)
    kept = _kept(incoming, assessment.status) if assessment.status is not None else None
    return kept, assessment


def decision(incoming: HandoffPackage, assessment: Assessment) -> HandoffDecision | None:
    """What the thread page shows about a package not taken as claimed; None when it was."""
    if assessment.as_claimed:
        return None
    return HandoffDecision(
        handoff_package_id=incoming.handoff_package_id,
        claimed_status=incoming.package_status,
        kept_status=assessment.status,
        reason=assessment.reason,
    )


def ready_for_cycle(package: HandoffPackage | None, last_compaction_at: datetime | None) -> bool:
    """The definition of "handoff ready": a ready package with its summary, made since the last compaction."""
    return (
        package is not None
        and assess(package).status is PackageStatus.READY
        and (last_compaction_at is None or package.created_at >= last_compaction_at)
    )


def thread_ready(state: ThreadState) -> bool:
    """The thread holds a ready package for its current cycle."""
    return ready_for_cycle(state.handoff, state.last_compaction_at)


def expire(package: HandoffPackage, now: datetime, ttl: timedelta) -> HandoffPackage | None:
    """The expired package when its TTL ran out before it was consumed, else None."""
    if STATUS_ORDER[package.package_status] == 2 or now < package.created_at + ttl:
        return None
    return package.model_copy(update={"package_status": PackageStatus.EXPIRED})


def _finished(package: HandoffPackage) -> str:
    into = f" into {package.to_thread_id}" if package.package_status is PackageStatus.CONSUMED else ""
    return f"{package.package_status.value}{into}"


def _kept(incoming: HandoffPackage, status: PackageStatus) -> HandoffPackage:
    if status is incoming.package_status:
        return incoming
    return incoming.model_copy(update={"package_status": status, "ready_at": None})
