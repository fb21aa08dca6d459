from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROLLOUT_THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
ROLLOUT_FILE = FIXTURES / f"rollout-2026-03-25T15-00-00-{ROLLOUT_THREAD}.jsonl"


@pytest.fixture
def app_server_lines() -> list[str]:
    return (FIXTURES / "app_server_session.jsonl").read_text().splitlines()
