"""The analytics views tell the agent's own part from a facts-only package by the relay's own mark (core.handoff)."""

from __future__ import annotations

from core.handoff import FACTS_ONLY_MARK
from sinks.migrations import MIGRATIONS


def test_the_relay_views_match_the_mark_the_relay_writes() -> None:
    assert not {"'", "\\"} & set(FACTS_ONLY_MARK)  # the SQL literal is the mark in quotes, nothing escaped
    (relay_views,) = (m for m in MIGRATIONS if any("analytics_relay_daily" in s for s in m.statements))
    assert sum(f"startsWith(summary_text, '{FACTS_ONLY_MARK}')" in s for s in relay_views.statements) >= 1
