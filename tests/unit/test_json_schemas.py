"""The committed JSON Schemas are exactly what the models generate, and they describe the same contract."""

from __future__ import annotations

import json

import pytest

from schemas.export import EXPORTED, JSON_DIR, render
from tests.samples import SNAPSHOT


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_committed_schema_is_current(name: str) -> None:
    path = JSON_DIR / f"{name}.json"
    assert path.exists(), f"{path} missing: run `python -m schemas.export`"
    assert path.read_text(encoding="utf-8") == render(name), f"{path} is stale: run `python -m schemas.export`"


def test_no_schema_file_without_a_model() -> None:
    assert {p.stem for p in JSON_DIR.glob("*.json")} == set(EXPORTED)


def test_snapshot_schema_pins_the_spec_enums_and_required_fields() -> None:
    schema = json.loads((JSON_DIR / "ThreadContextSnapshot.json").read_text(encoding="utf-8"))
    defs = schema["$defs"]
    assert defs["SourceKind"]["enum"] == ["codex_app_server", "codex_sdk", "worker_estimator"]
    assert defs["ContextBudgetLevel"]["enum"] == ["safe", "watch", "urgent", "critical"]
    assert schema["additionalProperties"] is False
    additive = {  # beside the spec's fields, never in place of one
        "agent_tool",
        "model",
        "shown_remaining_pct",
        "context_tokens",
        "context_window_tokens",
        "tool_version",
    }
    assert set(schema["properties"]) == set(SNAPSHOT) | {"schema_version"} | additive
    assert not additive & set(schema["required"])
    assert {"thread_id", "snapshot_id", "snapshot_version", "captured_at"} <= set(schema["required"])


def test_alert_schema_pins_spec_types_and_statuses() -> None:
    defs = json.loads((JSON_DIR / "ContextAlert.json").read_text(encoding="utf-8"))["$defs"]
    assert defs["AlertType"]["enum"] == [
        "context_watch",
        "context_urgent",
        "context_critical",
        "compaction_risk",
        "handoff_missing",
    ]
    assert defs["AlertStatus"]["enum"] == ["opened", "acked", "resolved"]


def test_client_event_schema_names_the_spec_sse_events() -> None:
    schema = json.loads((JSON_DIR / "ClientEvent.json").read_text(encoding="utf-8"))
    assert set(schema["discriminator"]["mapping"]) == {
        "conversation.context_indicator.updated",
        "project.context_risk.updated",
        "thread.handoff.required",
        "thread.handoff.ready",
        "thread.master_action.issued",  # issue 21, beside the spec's four
        "tool.compaction_point.moved",  # issue 37
    }
