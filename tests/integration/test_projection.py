"""The projection on the real broker: a thread that only sends session events gets a budget, levels and a recovery.

No worker snapshot is ever sent: the engine's state for the thread comes only from the estimator snapshots the
projection publishes, and the compaction shows at once (seed 003), without waiting for the next usage sample.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from core.settings import Settings
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, produce
from tests.unit.projection.builders import THREAD, completed, message, started, usage

pytestmark = pytest.mark.kafka

IDENTITY = {"project_id": "proj-1", "node_id": "node-1", "worker_id": "worker-1"}
CODEX = {"model": "gpt-5-codex", "window": 272_000}


def _events(*events):
    return [("session-events", THREAD, e.model_copy(update=IDENTITY)) for e in events]


async def test_session_events_alone_drive_the_level_and_a_compaction_recovers_it_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker", CTXBUDGET_STALE_FACTOR="1000").start()
    try:
        async with Outputs(settings) as outputs:

            def level() -> str | None:
                return outputs.latest_states().get(THREAD, {}).get("context_budget_level")

            await produce(settings, _events(usage(60_000, 0, **CODEX)))
            await outputs.wait_for(lambda o: level() == "safe", within=60, what="safe from the first sample")
            # The surface grows past the watch and urgent boundaries with no new usage sample.
            await produce(settings, _events(message(70_000, 10), message(40_000, 20)))
            await outputs.wait_for(lambda o: level() == "urgent", within=60, what="urgent from surface growth")
            await produce(settings, _events(started(30), completed(31, before=170_000, after=12_000)))
            await outputs.wait_for(lambda o: level() == "safe", within=60, what="safe right after the compaction")

            state = outputs.latest_states()[THREAD]
            assert state["source_kind"] == "worker_estimator"
            assert state["compaction_count"] == 1
            changes = [
                (r["previous_level"], r["context_budget_level"])
                for r in outputs.of_thread("context-events", THREAD)
                if r["event_type"] == "thread.context.level_changed"
            ]
            assert changes == [("safe", "watch"), ("watch", "urgent"), ("urgent", "safe")]
            [finished] = outputs.of_thread("compactions", THREAD)
            assert (finished["tokens_before"], finished["tokens_after"]) == (170_000, 12_000)
    finally:
        assert worker.stop() == 0, worker.output()
