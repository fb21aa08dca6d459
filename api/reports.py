"""The worker report (spec 5.2) as a snapshot for the `snapshots` topic, and the answer the engine would give.

Identity: the reporter's HTTP sink sends the snapshot's `snapshot_id` as `Idempotency-Key` and its version as
`X-Snapshot-Version`, and the API keeps both. A caller that sends neither gets them derived from the body with the
reporter's derivation (core.snapshot_identity) for a source without positions of its own: the version is `captured_at`
in epoch milliseconds shifted left by RESEND_BITS, so it grows with `captured_at` per thread and source and sits in
the same range as the reporter's versions; the id hashes thread, source kind, version and `captured_at`, so the same
report sent twice is the same snapshot and the engine drops the repeat.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from core.action_lifecycle import still_owed
from core.actions import actions_for_level
from core.engine_config import EngineConfig
from core.levels import classify_level, report_interval_seconds
from core.precedence import Verdict
from core.snapshot_identity import snapshot_id as derived_snapshot_id
from core.snapshot_identity import snapshot_version
from schemas import (
    MasterActionItem,
    ThreadContextSnapshot,
    ThresholdPolicy,
    WorkerReportRequest,
    WorkerReportResponse,
)
from schemas.admission import version_refusal
from schemas.base import ID_RULE, Id, Version
from schemas.master_actions import REQUESTABLE_ACTIONS

IDEMPOTENCY_KEY = "Idempotency-Key"
SNAPSHOT_VERSION = "X-Snapshot-Version"
ENGINE_CONFIG = EngineConfig()
_ID: TypeAdapter[str] = TypeAdapter(Id)
_VERSION: TypeAdapter[int] = TypeAdapter(Version)


@dataclass(frozen=True)
class KnownActions:
    """The engine's latest published actions of a thread and the compaction cycle they belong to."""

    compaction_count: int
    items: list[MasterActionItem]


class InvalidIdentity(ValueError):
    """The snapshot has no valid identity; `loc` names the header (or body field) at fault, as in a 422."""

    def __init__(self, loc: tuple[str, str], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def snapshot_of(report: WorkerReportRequest, idempotency_key: str | None, version: str | None) -> ThreadContextSnapshot:
    """The snapshot the report describes, with the identity its headers give or one derived from the body."""
    try:
        snapshot_version_ = (
            _VERSION.validate_python(snapshot_version(int(report.captured_at.timestamp() * 1000)))
            if version is None
            else _VERSION.validate_json(version, strict=True)
        )
    except ValidationError as error:
        if version is None:
            raise InvalidIdentity(("body", "captured_at"), f"outside 1970..2255: send {SNAPSHOT_VERSION}") from error
        raise InvalidIdentity(("header", SNAPSHOT_VERSION), "must be an integer in 0..2**53") from error
    ahead = version_refusal(snapshot_version_, report.captured_at)
    if ahead is not None:
        raise InvalidIdentity(("header", SNAPSHOT_VERSION), ahead)
    try:
        snapshot_id = (
            derived_snapshot_id(report.thread_id, report.source_kind, snapshot_version_, report.captured_at)
            if idempotency_key is None
            else _ID.validate_python(idempotency_key, strict=True)
        )
    except ValidationError as error:
        raise InvalidIdentity(("header", IDEMPOTENCY_KEY), ID_RULE) from error
    fields = {name: getattr(report, name) for name in WorkerReportRequest.model_fields}
    return ThreadContextSnapshot(**fields, snapshot_id=snapshot_id, snapshot_version=snapshot_version_)


def report_answer(
    snapshot: ThreadContextSnapshot,
    policy: ThresholdPolicy,
    verdict: Verdict = Verdict.ACCEPT,
    known: KnownActions | None = None,
) -> WorkerReportResponse:
    """Spec 5.2's answer: the engine's level under the project's policy, the cadence of 5.1, the actions of 4.1 (and
    a handoff the master requested in this cycle) that are still open by what the engine last published of the
    thread (all of them for a thread it does not know yet, or when this report starts a new compaction cycle);
    `accepted` is false (with the reason) when the engine will drop the snapshot by `verdict`."""
    level = classify_level(snapshot.context_budget_remaining_pct, policy)
    accepted = verdict is Verdict.ACCEPT
    same_cycle = known is not None and snapshot.compaction_count <= known.compaction_count
    cycle_items = known.items if known and same_cycle else []
    due = actions_for_level(level)
    due += [i.action for i in cycle_items if i.open and i.action in REQUESTABLE_ACTIONS and i.action not in due]
    actions, items = still_owed(due, cycle_items)
    return WorkerReportResponse(
        accepted=accepted,
        reason=None if accepted else verdict.value,
        thread_id=snapshot.thread_id,
        context_budget_level=level,
        next_required_report_in_seconds=report_interval_seconds(level, ENGINE_CONFIG),
        master_actions=actions,
        open_master_actions=items,
    )
