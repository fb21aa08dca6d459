"""Every kind of bad input, mixed into a valid stream, lands in deadletter with its reason and exact bytes."""

from __future__ import annotations

import asyncio
import base64
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.settings import Settings
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, get_json, produce
from tests.unit.engine.builders import snapshot
from tests.unit.test_schemas_invalid import EVENT_CASES, SNAPSHOT_CASES

pytestmark = pytest.mark.kafka


async def test_bad_records_are_dead_lettered_and_the_stream_goes_on(settings: Settings, tmp_path: Path) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    bad = [("snapshots", "thread-abc", data, reason) for _, data, reason, _ in SNAPSHOT_CASES]
    bad += [("session-events", "thread-abc", data, "validation_error") for _, data, _ in EVENT_CASES]
    bad += [
        ("snapshots", "someone-else", snapshot(50, thread="thread-abc", version=999).model_dump_json().encode(),
         "key_mismatch"),
        ("handoff-packages", "thread-abc", b'{"handoff_package_id": "hp"}', "validation_error"),
        ("alert-commands", "a-1", b"not json", "invalid_json"),
        ("policies", "proj-x", b'{"project_id": "proj-x", "safe_min_pct": 10, "watch_min_pct": 50}',
         "validation_error"),
    ]  # fmt: skip
    good = [snapshot(pct, thread="thread-ok", version=i + 1, seconds=i) for i, pct in enumerate((80, 50, 30))]
    records: list[tuple[str, str, bytes]] = []
    for i, (topic, key, data, _) in enumerate(bad):
        records.append((topic, key, data))
        if i % 10 == 0 and good:
            s = good.pop(0)
            records.append(("snapshots", s.thread_id, s.model_dump_json().encode()))
    records += [("snapshots", s.thread_id, s.model_dump_json().encode()) for s in good]
    # After thread-ok is known under proj-1: another project's report of it, and one dated year 9999 (issue 20).
    takeover = snapshot(99, thread="thread-ok", project="proj-evil", version=10, seconds=9)
    dated = snapshot(99, thread="thread-ok", version=11).model_copy(
        update={"captured_at": datetime(9999, 1, 1, tzinfo=UTC)}
    )
    late = [(takeover, "project_mismatch"), (dated, "implausible_time")]
    for record, reason in late:
        data = record.model_dump_json().encode()
        records.append(("snapshots", "thread-ok", data))
        bad.append(("snapshots", "thread-ok", data, reason))

    worker = WorkerProcess(settings, tmp_path / "worker").start()
    try:
        async with Outputs(settings) as outputs:
            await produce(settings, records)
            await outputs.wait_for(lambda o: len(o.records["deadletter"]) >= len(bad), what="every dead letter")
            await outputs.wait_for(
                lambda o: o.latest_states().get("thread-ok", {}).get("context_budget_remaining_pct") == 30,
                what="valid records processed",
            )
            letters = outputs.records["deadletter"]
            assert len(letters) == len(bad)
            got = sorted(
                (d["source_topic"], base64.urlsafe_b64decode(d["original_value"]), d["reason"]) for d in letters
            )
            assert got == sorted((settings.topic(t), data, reason) for t, _, data, reason in bad)
            assert all(d["detail"] for d in letters)
            assert set(outputs.latest_states()) == {"thread-ok"}  # nothing bad reached a thread's state
            # The worker's metrics count the same dead letters by reason, and the records it applied. A batch is
            # counted once its outputs are published, so the counts may trail the outputs seen above for a moment.
            by_reason = Counter(reason for *_, reason in bad)
            consumed = 'ctxbudget_records_consumed_total{agent="thread_engine"'

            def counted() -> bool:
                metrics = _scrape(f"{worker.web}/metrics")
                engine = [value for name, value in metrics.items() if name.startswith(consumed)]
                letters = {r: metrics.get(f'ctxbudget_dead_letters_total{{reason="{r}"}}', 0) for r in by_reason}
                return sum(engine) >= len(records) - len(bad) and all(letters[r] >= n for r, n in by_reason.items())

            await _until(counted, within=30, what="the metrics to count the batches")
            metrics = await asyncio.to_thread(_scrape, f"{worker.web}/metrics")
            for reason, count in by_reason.items():
                assert metrics[f'ctxbudget_dead_letters_total{{reason="{reason}"}}'] == count, reason
            # Everything consumed: the sampled lag of every input partition returns to zero; the worker is ready.
            await _until(lambda: _lags(_scrape(f"{worker.web}/metrics")) == {0.0}, within=30, what="lag back to zero")
            readiness = await asyncio.to_thread(get_json, f"{worker.web}/readyz")
            assert readiness["ready"] is True, readiness
    finally:
        assert worker.stop() == 0, worker.output()


def _scrape(url: str) -> dict[str, float]:
    """Prometheus text format: each sample line `name{labels} value`."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = (line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, value in samples}


def _lags(metrics: dict[str, float]) -> set[float]:
    return {value for name, value in metrics.items() if name.startswith("ctxbudget_consumer_lag{")}


async def _until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(1)
