"""The agent's part of a handoff package (spec 8.3): what only the agent knows, in one fixed JSON shape.

The same shape is what `ctxbudget handoff write` reads on stdin (the hooks tell the agent to write it) and the Codex
app-server `outputSchema` of the turn that asks for it, so both agent tools answer alike.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.base import MAX_LONG_TEXT_LENGTH, TextList


class AgentHandoff(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: str = Field(
        min_length=1, max_length=MAX_LONG_TEXT_LENGTH, description="Where the work stands, for the next thread."
    )
    open_questions: TextList = Field(default_factory=list)
    next_actions: TextList = Field(default_factory=list, description="What the next thread should do first.")
    decision_links: TextList = Field(default_factory=list, description="Where decisions are recorded (paths, URLs).")


def output_schema() -> dict[str, Any]:
    """The JSON Schema of the shape in the strict form structured outputs need: every property required, no others."""
    schema = AgentHandoff.model_json_schema()
    schema["required"] = list(schema["properties"])
    schema["additionalProperties"] = False
    for field in schema["properties"].values():
        field.pop("default", None)
    return schema


def ask_text(action: str) -> str:
    """What the agent is asked: stop growing the context and write its part of the handoff as that JSON."""
    return (
        f"ctxbudget: the context budget asks for `{action}` before this thread compacts. Finish the step you are on"
        " without reading anything large, then answer with ONLY one JSON object of this shape (no prose around it):"
        ' {"summary": "where the work stands", "open_questions": ["..."], "next_actions": ["..."],'
        ' "decision_links": ["paths or URLs where decisions are recorded"]}. Files, patches, commands and tests are'
        " collected by the worker; write only what you alone know."
    )


def parse(text: str) -> AgentHandoff | None:
    """The handoff in an agent's answer: the whole text, else its last JSON object; None when there is none."""
    try:
        return AgentHandoff.model_validate_json(text)
    except ValidationError:
        pass
    decoder = json.JSONDecoder()
    found: AgentHandoff | None = None
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
            found = AgentHandoff.model_validate(value)
        except (ValueError, ValidationError):
            continue
    return found
