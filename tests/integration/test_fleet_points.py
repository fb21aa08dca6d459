"""The fleet's compaction points on the real broker, in one worker process of every role: one thread's threshold
compactions move the point of its key (the compacted `compaction-points` topic), the move is told once, and an
unrelated thread of the same key, in another project, turns critical against it on its next turn."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest

from core.settings import Settings
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, produce
from tests.unit.compaction_points.builders import MOVED_TO, Thread

pytestmark = pytest.mark.kafka

KEY = "claude-code|2.1.x|claude-sonnet-4-5|200000"


def _events(records):
    return [("session-events", r.thread_id, r) for r in records]


async def test_a_point_learnt_from_one_thread_moves_an_unrelated_threads_level(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker", CTXBUDGET_STALE_FACTOR="1000").start()
    try:
        async with Outputs(settings) as outputs:

            def level(thread: str) -> str | None:
                return outputs.latest_states().get(thread, {}).get("context_budget_level")

            def moves() -> list[dict]:
                return [e for e in outputs.records["client-events"] if e["event_type"] == "tool.compaction_point.moved"]

            other = Thread("thread-b", "proj-2", "worker-b")
            await produce(settings, _events([other.usage(125_000, 0)]))
            await outputs.wait_for(lambda o: level("thread-b") == "urgent", within=60, what="urgent by the formula")

            compacting = Thread("thread-a", "proj-1", "worker-a")
            for n in range(4):
                await produce(settings, _events(compacting.compaction(MOVED_TO, 10 + n)))
            await outputs.wait_for(lambda o: len(moves()) == 1, within=60, what="the move told")
            await outputs.wait_for(
                lambda o: any(p["compactions"] == 4 for p in o.records["compaction-points"]),
                within=60,
                what="4 samples",
            )

            # The engine reads the points through a global table, which may trail the topic by a moment: a reading
            # taken before it holds the new point is measured against the old one, so readings go on until one is not.
            for minute in range(20, 80, 3):
                await produce(settings, _events([other.usage(126_000, minute)]))
                with contextlib.suppress(AssertionError):
                    await outputs.wait_for(lambda o: level("thread-b") == "critical", within=3)
                    break
            assert level("thread-b") == "critical", "critical by the fleet"
            [moved] = moves()
            assert (moved["project_id"], moved["point_key"], moved["compaction_point_tokens"]) == (
                "proj-1",
                KEY,
                MOVED_TO,
            )
            [point, *_] = reversed(outputs.records["compaction-points"])
            assert (point["point_key"], point["compaction_point_tokens"], point["moves"]) == (KEY, MOVED_TO, 1)
    finally:
        assert worker.stop() == 0, worker.output()
