"""Project risk and conversation indicators on the real broker: snapshots -> engine -> thread-state -> the three
project folds -> project-risk, conversation-indicators, client-events.

Two projects, five threads, three conversations (single_device registered before its thread, group and master_agent
after theirs; the master then switches main thread). Every output is compared exactly with the topology's own
declaration run by the in-memory runtime (`Feed`), fed the same registry entries and the thread states the engine
published, step by step; the readable assertions after it pin what the spec asks of those outputs.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from schemas import Conversation, ConversationType, Record, ThreadState
from schemas.codec import encode_record
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, produce
from tests.unit.aggregates.builders import Feed, conversation
from tests.unit.engine.builders import snapshot

pytestmark = pytest.mark.kafka

# Nothing goes stale and no handoff grace expires mid-test: every thread state comes from a snapshot.
ENV = {"CTXBUDGET_STALE_FACTOR": "1000", "CTXBUDGET_HANDOFF_MISSING_GRACE_SECONDS": "3600"}
SINGLE, GROUP, MASTER = ConversationType.SINGLE_DEVICE, ConversationType.GROUP, ConversationType.MASTER_AGENT
PUBLISHED = ("project-risk", "conversation-indicators", "client-events")
OUR_EVENTS = {"project.context_risk.updated", "conversation.context_indicator.updated"}
"""The client events of these folds (the engine's handoff events share the topic)."""


def _json(record: Record) -> dict[str, Any]:
    return json.loads(encode_record(record))


def _ours(outputs: Outputs, topic: str) -> list[dict[str, Any]]:
    return [r for r in outputs.records[topic] if topic != "client-events" or r["event_type"] in OUR_EVENTS]


def _by_key(records: list[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """Per-key sequences, without the processing time: Kafka orders records per key, not across keys or agents."""
    grouped: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        key = (record.get("event_type", ""), record.get("conversation_id") or record["project_id"])
        grouped[key].append({k: v for k, v in record.items() if k != "occurred_at"})
    return dict(grouped)


class Scenario:
    """Sends one input at a time and waits until the worker has published all the in-memory `Feed` publishes for it."""

    def __init__(self, settings: Settings, outputs: Outputs) -> None:
        self.settings, self.outputs = settings, outputs
        self.pipeline = Feed()
        self.fed_states = 0
        self.snapshot_version = 0

    def expected(self, topic: str) -> list[dict[str, Any]]:
        return [_json(r) for r in self.pipeline.of(topic)]

    async def thread(self, thread: str, pct: float, project: str, **extra: Any) -> None:
        self.snapshot_version += 1
        s = snapshot(pct, thread=thread, project=project, version=self.snapshot_version, **extra)
        await produce(self.settings, [("snapshots", thread, s)])
        await self.outputs.wait_for(
            lambda o: any(r["snapshot_id"] == s.snapshot_id for r in o.records["thread-state"]), what=s.snapshot_id
        )
        for state in self.outputs.records["thread-state"][self.fed_states :]:
            self.pipeline.thread(ThreadState.model_validate_json(json.dumps(state)))
            self.fed_states += 1
        await self._caught_up(s.snapshot_id)

    async def conversation(self, entry: Conversation) -> None:
        await produce(self.settings, [("conversations", entry.conversation_id, entry)])
        self.pipeline.conversation(entry)
        await self._caught_up(f"{entry.conversation_id}@{entry.updated_at}")

    async def _caught_up(self, step: str) -> None:
        def done(o: Outputs) -> bool:
            return all(len(_ours(o, t)) >= len(self.pipeline.of(t)) for t in PUBLISHED)

        await self.outputs.wait_for(done, what=f"the outputs of {step}")


@pytest.mark.parametrize(
    "layout",
    [
        [(None, "engine, projection, aggregates, sinks (consumer group {app})")],
        [
            ("engine,projection", "engine, projection (consumer group {app}-engine-projection)"),
            ("aggregates,sinks", "aggregates, sinks (consumer group {app}-aggregates-sinks)"),
        ],
    ],
    ids=["one-worker", "aggregates-in-another-process"],
)  # fmt: skip
async def test_two_projects_five_threads_three_conversations_publish_exactly_the_pure_folds_outputs(
    settings: Settings, tmp_path: Path, layout: list[tuple[str | None, str]]
) -> None:
    """Also with the aggregates in a process of their own: `layout` is each worker's roles and what it prints."""
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    workers = [
        WorkerProcess(
            settings, tmp_path / f"worker-{i}", **ENV, **({"CTXBUDGET_ROLES": roles} if roles else {})
        ).start()
        for i, (roles, _) in enumerate(layout)
    ]
    try:
        for worker, (_, printed) in zip(workers, layout, strict=True):
            assert await worker.printed("roles: ") == printed.format(app=settings.app_id)
        async with Outputs(settings) as outputs:
            run = Scenario(settings, outputs)
            await run.conversation(conversation("conv-single", SINGLE, ["a"], project="proj-1", seconds=0))
            await run.thread("a", 82, "proj-1")
            await run.thread("b", 45, "proj-1", expected_in=600)
            await run.thread("c", 30, "proj-1", must_finish=True)
            await run.thread("m1", 70, "proj-2")
            await run.thread("m2", 95, "proj-2")
            await run.conversation(conversation("conv-group", GROUP, ["a", "b", "c"], project="proj-1", seconds=1))
            await run.conversation(conversation("conv-master", MASTER, ["m1"], project="proj-2", seconds=2))
            # a walks the levels: 82 safe -> 55 watch -> 35 urgent -> 34.8 (ring 34) -> 34.3 (nothing visible) -> 20
            for pct in (55, 35, 34.8, 34.3, 20):
                await run.thread("a", pct, "proj-1", must_finish=pct < 40)
            await run.conversation(conversation("conv-master", MASTER, ["m2"], project="proj-2", seconds=3))
            await run.thread("m2", 93.4, "proj-2")
            await asyncio.sleep(2)  # anything published beyond the expectation would show by now

            for topic in PUBLISHED:
                assert _by_key(_ours(outputs, topic)) == _by_key(run.expected(topic)), topic

            views = {r["project_id"]: r for r in outputs.records["project-risk"]}
            ranked = {p: [t["thread_id"] for t in v["active_thread_contexts"]] for p, v in views.items()}
            assert ranked == {"proj-1": ["a", "c", "b"], "proj-2": ["m1", "m2"]}
            assert views["proj-1"]["next_compaction_risk_thread_id"] == "a"
            assert views["proj-1"]["threads_requiring_handoff"] == ["a", "c", "b"]  # watch prepares a handoff too
            assert views["proj-2"]["next_compaction_risk_thread_id"] is None

            items = {r["conversation_id"]: r for r in outputs.records["conversation-indicators"]}
            rings = {c: item["context_budget_indicator"] for c, item in items.items()}
            assert rings["conv-single"] == {
                "schema_version": 1, "visible": True, "style": "ring_percent", "percent": 20, "level": "critical",
                "stale": False,
            }  # fmt: skip
            assert rings["conv-group"]["visible"] is False
            assert (rings["conv-master"]["percent"], rings["conv-master"]["level"]) == (93, "safe")
            assert items["conv-single"]["must_finish_before_compaction"] is True
            assert items["conv-single"]["context_budget_source_node_id"] == "mac-01"

            def ring_events(conversation_id: str) -> list[tuple[bool, int | None, str | None]]:
                return [
                    (i["visible"], i["percent"], i["level"])
                    for e in outputs.records["client-events"]
                    if e.get("conversation_id") == conversation_id
                    for i in [e["context_budget_indicator"]]
                ]

            # one event per visible change, none for 34.8 -> 34.3
            assert ring_events("conv-single") == [
                (True, 82, "safe"), (True, 55, "watch"), (True, 35, "urgent"), (True, 34, "urgent"),
                (True, 20, "critical"),
            ]  # fmt: skip
            assert ring_events("conv-group") == []
            # registered after m1; the switch hides the ring until m2's values arrive, never showing m1's number
            assert ring_events("conv-master") == [
                (True, 70, "safe"), (False, None, None), (True, 95, "safe"), (True, 93, "safe"),
            ]  # fmt: skip
            # each project view is published with its one client event
            events = [e for e in _ours(outputs, "client-events") if e["event_type"] == "project.context_risk.updated"]
            assert len({e["event_id"] for e in events}) == len(events) == len(outputs.records["project-risk"])
    finally:
        codes = [worker.stop() for worker in workers]
        assert codes == [0] * len(workers), "\n".join(worker.output() for worker in workers)


async def test_a_silent_thread_turns_stale_on_its_ring_then_leaves_its_project_after_the_idle_time(
    settings: Settings, tmp_path: Path
) -> None:
    """The engine's timer marks the thread stale (critical: 5 s reports, x1.2), the project fold's timer retires it
    14 s after its last change: both timers and their ownership of the partitions, on the real broker."""
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    # Retired 14 s after its last change: the stale state (at 6 s) has 8 s to cross the engine and the project fold
    # on a busy machine before the retirement would come first.
    env = {"CTXBUDGET_STALE_FACTOR": "1.2", "CTXBUDGET_PROJECT_RETIRE_SECONDS": "14"}
    worker = WorkerProcess(settings, tmp_path / "worker", **env).start()
    try:
        async with Outputs(settings) as outputs:
            await produce(
                settings, [("conversations", "conv-z", conversation("conv-z", SINGLE, ["z"], project="proj-9"))]
            )
            await produce(settings, [("snapshots", "z", snapshot(20, thread="z", project="proj-9", version=1))])
            await outputs.wait_for(
                lambda o: any(not r["active_thread_contexts"] for r in o.records["project-risk"]),
                within=60,
                what="the thread retired",
            )
            views = [
                [(t["thread_id"], t["stale"]) for t in r["active_thread_contexts"]]
                for r in outputs.records["project-risk"]
            ]
            # On a busy machine a fold may take the fresh and the stale state in one batch and publish only the
            # latter, so the transition is asserted where it is made (the engine) and its order downstream.
            engine = [state["stale"] for state in outputs.of_thread("thread-state", "z")]
            assert (engine[0], engine[-1]) == (False, True)
            assert views[-2:] == [[("z", True)], []]  # marked stale, then retired
            assert all(view == [("z", False)] for view in views[:-2])
            assert outputs.records["project-risk"][-1]["master_context_strategy_summary"] == "No live threads."
            rings = [
                (e["context_budget_indicator"]["percent"], e["context_budget_indicator"]["stale"])
                for e in outputs.records["client-events"]
                if e["event_type"] == "conversation.context_indicator.updated"
            ]
            # the last value, marked stale; retirement leaves the ring
            assert rings[-1] == (20, True)
            assert all(ring == (20, False) for ring in rings[:-1])
    finally:
        assert worker.stop() == 0, worker.output()
