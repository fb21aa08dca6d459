"""Handoff packages (spec 3.3): what the next thread needs to continue the work, packed before compaction."""

from __future__ import annotations

from pydantic import Field, model_validator

from schemas.base import Id, LongText, Record, TextList, Timestamp
from schemas.enums import PackageStatus


class HandoffPackage(Record):
    handoff_package_id: Id
    project_id: Id
    task_id: Id | None = None
    from_thread_id: Id
    to_thread_id: Id | None = Field(default=None, description="The relay thread, once it is known.")
    package_status: PackageStatus
    summary_text: LongText = ""
    open_questions: TextList = Field(default_factory=list)
    critical_files: TextList = Field(default_factory=list)
    critical_commands: TextList = Field(default_factory=list)
    critical_tests: TextList = Field(default_factory=list)
    critical_artifacts: TextList = Field(default_factory=list)
    decision_links: TextList = Field(default_factory=list)
    created_at: Timestamp
    ready_at: Timestamp | None = None
    consumed_at: Timestamp | None = None

    @model_validator(mode="after")
    def _lifecycle_timestamps(self) -> HandoffPackage:
        status = self.package_status
        if status in (PackageStatus.READY, PackageStatus.CONSUMED) and self.ready_at is None:
            raise ValueError(f"a {status} package needs ready_at")
        if status is PackageStatus.CONSUMED and self.consumed_at is None:
            raise ValueError("a consumed package needs consumed_at")
        for name in ("ready_at", "consumed_at"):
            stamp = getattr(self, name)
            if stamp is not None and stamp < self.created_at:
                raise ValueError(f"{name} is earlier than created_at")
        return self
