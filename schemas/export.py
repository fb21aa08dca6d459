"""JSON Schema export of every input and output record, for producers and consumers in other languages.

`python -m schemas.export` rewrites `schemas/json/`; a test fails when the committed files are stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from schemas.alert import AlertCommand, ContextAlert
from schemas.compaction_points import CompactionPoint
from schemas.events import CLIENT_EVENT_ADAPTER, CompactionFinished, ContextEvent, DeadLetter, MasterActionRecord
from schemas.handoff import HandoffPackage
from schemas.master_actions import MasterActionCommand
from schemas.policy import ThresholdPolicy
from schemas.projection import ThreadProjection
from schemas.projects import TaskImportance
from schemas.session_events import SESSION_EVENT_ADAPTER
from schemas.snapshot import ThreadContextSnapshot, WorkerReportRequest, WorkerReportResponse
from schemas.state import ThreadState
from schemas.views import Conversation, ConversationItem, ProjectDetail, ThreadContextBudget

JSON_DIR = Path(__file__).parent / "json"

EXPORTED: dict[str, TypeAdapter[Any]] = {
    # inputs
    "ThreadContextSnapshot": TypeAdapter(ThreadContextSnapshot),
    "WorkerReportRequest": TypeAdapter(WorkerReportRequest),
    "SessionEvent": SESSION_EVENT_ADAPTER,
    "HandoffPackage": TypeAdapter(HandoffPackage),
    "ThresholdPolicy": TypeAdapter(ThresholdPolicy),
    "AlertCommand": TypeAdapter(AlertCommand),
    "MasterActionCommand": TypeAdapter(MasterActionCommand),
    "Conversation": TypeAdapter(Conversation),
    "TaskImportance": TypeAdapter(TaskImportance),
    # outputs
    "WorkerReportResponse": TypeAdapter(WorkerReportResponse),
    "ThreadState": TypeAdapter(ThreadState),
    "ContextEvent": TypeAdapter(ContextEvent),
    "ContextAlert": TypeAdapter(ContextAlert),
    "MasterActionRecord": TypeAdapter(MasterActionRecord),
    "ClientEvent": CLIENT_EVENT_ADAPTER,
    "ConversationItem": TypeAdapter(ConversationItem),
    "ProjectDetail": TypeAdapter(ProjectDetail),
    "ThreadContextBudget": TypeAdapter(ThreadContextBudget),
    "DeadLetter": TypeAdapter(DeadLetter),
    "CompactionFinished": TypeAdapter(CompactionFinished),
    "ThreadProjection": TypeAdapter(ThreadProjection),
    "CompactionPoint": TypeAdapter(CompactionPoint),
}


def render(name: str) -> str:
    schema = EXPORTED[name].json_schema(mode="validation")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"{name}.json", **schema}
    schema.setdefault("title", name)
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main(out_dir: Path = JSON_DIR) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    stale = {p.name for p in out_dir.glob("*.json")} - {f"{n}.json" for n in EXPORTED}
    for name in stale:
        (out_dir / name).unlink()
    for name in EXPORTED:
        (out_dir / f"{name}.json").write_text(render(name), encoding="utf-8")
    print(f"wrote {len(EXPORTED)} schemas to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
