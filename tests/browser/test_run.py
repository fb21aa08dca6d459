"""The web page of `ctxbudget run` itself, fed a scripted fleet: what the page shows is what the whole worker made.

The worker runs as a subprocess on the test broker, as an operator starts it; the test signs in with the operator
token from the file whose path it prints, and produces the workers' records to its topics. Each value on the page
went through the real engine (level), the conversation indicator fold (ring), the sink into the worker's own embedded
ClickHouse (the list) and the client-events stream (the live update).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, expect

from core.settings import Settings
from schemas import Conversation, ConversationType, ThreadContextSnapshot
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics
from tests.browser.conftest import conversation_row, signed_in
from tests.integration.pipeline import WorkerProcess, get_when_up, produce, until_listed
from tests.unit.engine.builders import snapshot

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.clickhouse]

STARTUP_SECONDS = 120
"""The worker's first start on a 2-core machine: topics, migrations, Faust's recovery of every table."""
PIPELINE_LIVE_WITHIN_MS = 10_000
"""A snapshot reaches an open page within this long: engine, routing and indicator folds, then the event stream."""


def reading(thread: str, project: str, pct: float, version: int) -> ThreadContextSnapshot:
    """A worker's snapshot of the thread, captured now (a snapshot from the past would be judged by its age)."""
    return snapshot(pct, thread=thread, project=project, version=version).model_copy(
        update={"captured_at": datetime.now(UTC)}
    )


async def test_ctxbudget_run_shows_a_scripted_fleets_rings_and_moves_them_live(
    settings: Settings, tmp_path: Path, tab: BrowserContext, artifacts: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    project, thread = f"proj-run-{tag}", f"thread-run-{tag}"
    settings = settings.model_copy(update={"app_id": f"test-{tag}"})
    await ensure_topics(settings)
    worker = WorkerProcess(
        settings,
        tmp_path / "worker",
        CTXBUDGET_API_PORT=str(free_port()),
        CTXBUDGET_STALE_FACTOR="1000",  # no report deadline passes while the test runs: the rings never turn stale
    )
    worker.start()
    try:
        address = (await worker.printed("web page and API: ", within=STARTUP_SECONDS)).split()[0]
        url = address.rstrip("/")
        token_file = Path((await worker.printed("operator token: ")).split()[0])
        token = (await asyncio.to_thread(token_file.read_text)).strip()
        assert "<html" in (await asyncio.to_thread(get_when_up, address, STARTUP_SECONDS, worker.alive)).lower()
        up = time.monotonic()

        now = datetime.now(UTC)
        device = Conversation(
            conversation_id=f"conv-device-{tag}",
            conversation_type=ConversationType.SINGLE_DEVICE,
            project_id=project,
            project_title="北区试产线回归",
            thread_ids=[thread],
            manual_pinned=True,
            updated_at=now,
        )
        group = Conversation(
            conversation_id=f"conv-group-{tag}",
            conversation_type=ConversationType.GROUP,
            project_id=project,
            project_title="联调群",
            thread_ids=[thread],  # the same thread: a group still shows no ring (spec 7.2)
            updated_at=now,
        )
        await produce(
            settings,
            [
                ("conversations", device.conversation_id, device),
                ("conversations", group.conversation_id, group),
                ("snapshots", thread, reading(thread, project, 52.7, version=1)),
            ],
        )

        # The list reads ClickHouse: wait for the sink to have written both items before the page loads them.
        listed = await until_listed(url, token, device.conversation_id, within=STARTUP_SECONDS)
        assert listed["context_budget_indicator"] == {
            "schema_version": 1, "visible": True, "style": "ring_percent", "percent": 52, "level": "watch",
            "stale": False,
        }  # fmt: skip
        listed_group = await until_listed(url, token, group.conversation_id, within=60, with_ring=False)
        assert listed_group["context_budget_indicator"]["visible"] is False
        print(f"first ring listed {time.monotonic() - up:.1f} s after the API answered")

        page = await signed_in(tab, url, token)
        rows = page.locator("ol.conversations > li")
        await expect(rows).to_have_count(2)
        order = await rows.evaluate_all("rows => rows.map(r => r.dataset.conversationId)")
        assert order == [device.conversation_id, group.conversation_id]  # pinned first
        meter = conversation_row(page, device.conversation_id).get_by_role("meter")
        await expect(meter).to_have_accessible_name("context budget 52%, watch")  # 52.7 floored, the engine's level
        await expect(meter).to_have_attribute("aria-valuenow", "52")
        await expect(meter.locator(".ring-percent")).to_have_text("52%")
        await expect(conversation_row(page, group.conversation_id).get_by_role("meter")).to_have_count(0)
        await page.screenshot(path=artifacts / "run.png", full_page=True)

        await page.evaluate("window.sameDocument = true")
        sent = time.monotonic()
        await produce(settings, [("snapshots", thread, reading(thread, project, 31.4, version=2))])
        await expect(meter).to_have_accessible_name("context budget 31%, urgent", timeout=PIPELINE_LIVE_WITHIN_MS)
        print(f"ring redrawn {time.monotonic() - sent:.1f} s after the snapshot was acknowledged")
        await expect(meter.locator(".ring-percent")).to_have_text("31%")
        await expect(conversation_row(page, group.conversation_id).get_by_role("meter")).to_have_count(0)
        assert await page.evaluate("window.sameDocument === true")  # redrawn in place, not reloaded
        await page.screenshot(path=artifacts / "run-live.png", full_page=True)
        await page.close()  # its event stream ends before the worker stops, as a reader leaving would end it
    finally:
        code = worker.stop()
        print(worker.output())  # shown when the test fails
        assert code == 0
