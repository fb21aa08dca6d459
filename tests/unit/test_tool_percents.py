"""The percent each agent tool shows, settled against the tool's own output, and one profile per tool giving it to
both the reporter (a worker's readings) and the projection (the pipeline's estimate).

Recorded from the real tools against the scripted model (tests/data/README.md): Claude Code 2.1.328's status-line
input, and Codex 0.169.0's TUI footer beside the usage its rollout wrote for the same requests.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.profiles import DEFAULT_CODEX_VERSION, ClaudeCodeProfile, CodexProfile, ProfileSet, TokenUsage
from reporter.claude_code.statusline import parse_status_input, status_reading

DATA = Path(__file__).resolve().parents[1] / "data"
NOW = datetime(2026, 12, 4, 17, 18, tzinfo=UTC)
PROMPT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def claude_status_inputs() -> list[str]:
    return (DATA / "claude_code" / "statusline-2.1.328.jsonl").read_text().splitlines()


def measured(line: str) -> dict[str, Any]:
    return json.loads(line)["context_window"]


def test_claude_code_shows_room_in_the_window_for_the_prompt_not_room_to_its_compaction_point() -> None:
    lines = [line for line in claude_status_inputs() if measured(line)["current_usage"] is not None]
    assert len(lines) == 2  # the two before the first reply carry no usage and no percent
    projection = ProfileSet().for_model(json.loads(lines[0])["model"]["id"])
    assert isinstance(projection, ClaudeCodeProfile)
    for line in lines:
        context = measured(line)
        usage, window = context["current_usage"], context["context_window_size"]
        prompt = sum(usage[name] for name in PROMPT)
        assert round(projection.shown_pct(prompt, window)) == context["remaining_percentage"]
        assert 100 - context["used_percentage"] == context["remaining_percentage"]
        # The reporter's status line reports what Claude Code said, and computes the same where a version says none.
        status = parse_status_input(line)
        assert status_reading(status, ClaudeCodeProfile(), NOW).shown_pct == context["remaining_percentage"]
        unsaid = status_reading(parse_status_input(line.replace('"used_percentage"', '"unsaid"')), projection, NOW)
        assert unsaid is not None
        assert unsaid.shown_pct is not None
        assert round(unsaid.shown_pct) == context["remaining_percentage"]
    # Room to the compaction point (177,000) is the budget, not what Claude Code shows: 61% where it showed 66%.
    last = measured(lines[-1])
    occupancy = sum(last["current_usage"][name] for name in (*PROMPT, "output_tokens"))
    assert last["remaining_percentage"] == 66
    assert round(projection.remaining_pct(occupancy, last["context_window_size"])) == 61
    # What the budget measured and the tool's version go with the reading, for the fleet's point of its key.
    reading = status_reading(parse_status_input(lines[-1]), ClaudeCodeProfile(), NOW)
    assert reading is not None
    assert (reading.context_tokens, reading.context_window, reading.tool_version) == (
        occupancy,
        last["context_window_size"],
        "2.1.328",
    )


def test_codex_shows_room_in_the_window_above_its_baseline_as_its_footer_does() -> None:
    recorded = json.loads((DATA / "codex" / "tui-0.169.0-context-left.json").read_text())["readings"]
    assert [r["percent_left"] for r in recorded] == [97, 91, 84, 78]
    projection = ProfileSet().for_model("gpt-5.5")
    assert projection == DEFAULT_CODEX_VERSION  # the reporter's Codex profile is the projection's
    assert isinstance(projection, CodexProfile)
    for reading in recorded:
        usage, window = TokenUsage(**reading["last_token_usage"]), reading["model_context_window"]
        assert DEFAULT_CODEX_VERSION.displayed_pct(usage, window) == reading["percent_left"]
        assert (
            round(projection.shown_pct(DEFAULT_CODEX_VERSION.tokens_in_context_window(usage), window))
            == (reading["percent_left"])
        )
    # Room to the compaction point (244,800) would have shown 96% at the first request, where Codex showed 97%.
    first = TokenUsage(**recorded[0]["last_token_usage"])
    assert round(projection.remaining_pct(first.total_tokens, recorded[0]["model_context_window"])) == 96
