"""A project's policy through a whole worker: loaded into the policy table, applied to the levels, and committed."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from core.settings import Settings
from schemas import ThresholdPolicy
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, committed_offsets, committed_records, produce
from tests.unit.engine.builders import at, snapshot

pytestmark = pytest.mark.kafka


async def test_a_policy_is_applied_to_the_levels_and_committed_once_the_table_holds_it(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    strict = ThresholdPolicy(
        project_id="proj-strict", safe_min_pct=90.0, watch_min_pct=70.0, urgent_min_pct=50.0, updated_at=at(0)
    )
    worker = WorkerProcess(settings, tmp_path / "worker").start()
    try:
        async with Outputs(settings) as outputs:
            await produce(settings, [("policies", strict.project_id, strict)])
            deadline = time.monotonic() + 60
            while committed_records(await committed_offsets(settings), settings.topic("policies")) < 1:
                assert time.monotonic() < deadline, worker.describe()
                await asyncio.sleep(0.5)
            report = snapshot(80, thread="thread-strict", project="proj-strict")  # safe by default, watch here
            await produce(settings, [("snapshots", report.thread_id, report)])
            await outputs.wait_for(lambda o: "thread-strict" in o.latest_states(), what="the thread's state")
            assert outputs.latest_states()["thread-strict"]["context_budget_level"] == "watch"
    finally:
        assert worker.stop() == 0, worker.output()
