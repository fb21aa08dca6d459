"""The conversation-list page in headless Chromium against the real API: rings, details, live updates, resume, access.

The module's tests share one API and one scenario (`world`) and run in file order: the live tests change rows the
earlier tests read as first written.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, expect

from api.event_ids import decode_event_id
from schemas import Record
from tests.browser.conftest import LiveApi, conversation_row, signed_in, user_token
from tests.browser.scenario import (
    SECTIONS,
    SHOWN_PCT,
    STRATEGY,
    WINDOW_TOKENS,
    World,
    indicator_changed,
    minute,
    project_view,
    risk_changed,
)
from tests.integration.test_api import produce, store
from tests.unit.sinks.records import compaction, compaction_point

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.clickhouse]

LIVE_WITHIN_MS = 5_000
"""A new value reaches an open page within this long (it is one broker hop and one fetch away)."""


async def publish(api: LiveApi, client: Any, tag: str, rows: tuple[str, list[Record]], event: Record) -> None:
    """What the pipeline does for a change: the sink writes the row, the stream publishes the client event."""
    store(client, tag, *rows)
    await produce(api.settings, "client-events", [(b"browser-test", event)])


async def times(locator: Any) -> list[datetime]:
    values = await locator.locator("time").evaluate_all("els => els.map(e => e.dateTime)")
    return [datetime.fromisoformat(v) for v in values]


async def test_the_home_list_is_pinned_then_latest_with_grey_rings_and_none_on_groups(
    live_api: LiveApi, world: World, tab: BrowserContext, artifacts: Path
) -> None:
    page = await signed_in(tab, live_api.url, user_token(world.project))
    rows = page.locator("ol.conversations > li")
    await expect(rows).to_have_count(len(world.conversations))
    order = await rows.evaluate_all("rows => rows.map(r => r.dataset.conversationId)")
    assert order == [c.conversation_id for c in world.conversations]

    for item in world.conversations:
        meter = conversation_row(page, item.conversation_id).get_by_role("meter")
        if item.conversation_type == "group":
            await expect(meter).to_have_count(0)  # spec 7.2
            continue
        shown = item.context_budget_indicator
        await expect(meter).to_have_accessible_name(f"context budget {shown.percent}%, {shown.level}")
        await expect(meter).to_have_attribute("aria-valuenow", str(shown.percent))
        await expect(meter.locator(".ring-percent")).to_have_text(f"{shown.percent}%")

    # spec 7.1: one neutral grey ring whatever the level, and no level or warning words stacked on the list
    strokes = await page.locator(".ring-fill").evaluate_all("els => els.map(e => getComputedStyle(e).stroke)")
    assert set(strokes) == {"rgb(125, 133, 144)"}
    listed = await page.locator("ol.conversations").inner_text()
    assert not {"safe", "watch", "urgent", "critical", "must finish"} & set(listed.lower().split())
    await page.screenshot(path=artifacts / "home.png", full_page=True)

    await page.reload()  # the token is kept for the tab
    await expect(rows).to_have_count(len(world.conversations))
    await expect(page.get_by_label("Bearer token")).to_have_count(0)


async def test_the_home_links_to_each_project_of_the_token_even_without_conversations(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any
) -> None:
    """Real workers' threads belong to no conversation: their project is reached from the home all the same."""
    solo = f"proj-workers-{world.tag}"
    threads = [f"thread-{name}-solo-{world.tag}" for name in ("crit", "watch", "quiet")]
    store(clickhouse, world.tag, "project-risk", [project_view(solo, threads)])
    page = await signed_in(tab, live_api.url, user_token(solo))
    await expect(page.get_by_text("No conversations are visible to this token.")).to_be_visible()

    link = page.get_by_role("list", name="Projects").get_by_role("link")
    await expect(link).to_have_count(1)
    await expect(link).to_contain_text(solo)
    await expect(link).to_contain_text("3 active threads")
    await expect(link).to_contain_text("1 requiring a handoff")
    await expect(link).to_contain_text(f"next compaction risk {threads[0]}")
    await link.click()
    await expect(page).to_have_url(f"{live_api.url}/#/projects/{solo}")
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Project {solo}")


async def test_a_new_indicator_redraws_the_ring_within_seconds_without_reloading(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any
) -> None:
    page = await signed_in(tab, live_api.url, user_token(world.project))
    device = world.conversation("device")
    meter = conversation_row(page, device.conversation_id).get_by_role("meter")
    await expect(meter).to_have_accessible_name("context budget 52%, watch")
    await page.evaluate("window.sameDocument = true")

    row, event = indicator_changed(device, 31, "urgent", minute(3))
    await publish(live_api, clickhouse, world.tag, ("conversation-indicators", [row]), event)

    await expect(meter).to_have_accessible_name("context budget 31%, urgent", timeout=LIVE_WITHIN_MS)
    await expect(meter.locator(".ring-percent")).to_have_text("31%")
    assert await page.evaluate("window.sameDocument === true")  # redrawn in place, not reloaded


async def test_a_list_reloaded_before_the_sink_wrote_keeps_the_newer_ring_the_stream_gave(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any
) -> None:
    """The list is read from ClickHouse, which the sink fills a moment after the stream's event: a reload in that
    moment (here: an event of a conversation the page does not list yet) must not draw the older value again."""
    page = await signed_in(tab, live_api.url, user_token(world.project))
    device = world.conversation("device")
    meter = conversation_row(page, device.conversation_id).get_by_role("meter")
    await expect(meter).to_have_accessible_name("context budget 31%, urgent")
    row, event = indicator_changed(device, 20, "critical", minute(3.5))
    await produce(live_api.settings, "client-events", [(b"browser-test", event)])  # the sink has not written it yet
    await expect(meter).to_have_accessible_name("context budget 20%, critical", timeout=LIVE_WITHIN_MS)

    await page.evaluate("document.querySelector('ol.conversations').dataset.before = 'reload'")
    unlisted = event.model_copy(update={"conversation_id": f"conv-new-{world.tag}", "event_id": f"new-{world.tag}"})
    await produce(live_api.settings, "client-events", [(b"browser-test", unlisted)])
    await expect(page.locator("ol.conversations:not([data-before])")).to_have_count(1, timeout=LIVE_WITHIN_MS)
    assert await meter.get_attribute("aria-label") == "context budget 20%, critical"  # at once, not after a retry
    store(clickhouse, world.tag, "conversation-indicators", [row])  # the sink catches up, for the tests after this


async def test_a_dropped_stream_resumes_with_last_event_id_and_gets_what_it_missed(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any
) -> None:
    page = await signed_in(tab, live_api.url, user_token(world.project))
    master = world.conversation("master")
    meter = conversation_row(page, master.conversation_id).get_by_role("meter")
    await expect(meter).to_have_accessible_name("context budget 80%, safe")
    reconnects: list[Any] = []
    page.on("request", lambda request: reconnects.append(request) if "/api/v1/events" in request.url else None)

    await live_api.stop()  # every open stream ends with the server
    await expect(page.locator("#live-status")).to_have_text("reconnecting…")
    row, event = indicator_changed(master, 80, "safe", minute(4), stale=True)
    await publish(live_api, clickhouse, world.tag, ("conversation-indicators", [row]), event)  # while it is away
    await live_api.start()

    await expect(meter).to_have_accessible_name("context budget 80%, safe, stale", timeout=30_000)
    await expect(page.locator("#live-status")).to_have_text("live")
    assert reconnects, "the page never reconnected"
    for request in reconnects:
        decode_event_id((await request.all_headers())["last-event-id"])  # each retry resumes from a position
    # a stale value is marked: dashed, faded ring (the label above names it for screen readers)
    assert await meter.evaluate("e => e.classList.contains('stale') && Number(getComputedStyle(e).opacity) < 1")


async def test_the_project_page_shows_every_thread_with_ring_and_level_the_next_risk_and_handoffs(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any, artifacts: Path
) -> None:
    page = await signed_in(tab, live_api.url, user_token(world.project))
    await expect(page.locator("ol.conversations > li")).to_have_count(len(world.conversations))
    for _ in range(10):  # by keyboard: Tab to the first conversation, Enter opens its project
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.classList.contains('conversation')"):
            break
    else:
        pytest.fail("Tab never reached a conversation")
    await page.keyboard.press("Enter")
    heading = page.get_by_role("heading", level=1)
    await expect(heading).to_have_text(f"Project {world.project}")
    await expect(heading).to_be_focused()

    expected = [
        (world.threads[0], 20, "critical", ""),
        (world.threads[1], 52, "watch", ""),
        (world.threads[2], 81, "safe", ", stale"),
    ]
    for thread, percent, level, stale in expected:
        row = page.locator(f'tr[data-thread-id="{thread}"]')
        await expect(row.get_by_role("meter")).to_have_accessible_name(f"context budget {percent}%, {level}{stale}")
        await expect(row.locator(".level")).to_have_text(level)
        await expect(row.locator(".stale-tag")).to_have_count(1 if stale else 0)
    await expect(page.get_by_test_id("next-risk")).to_have_text(world.threads[0])
    await expect(page.get_by_test_id("handoff-threads").get_by_role("link")).to_have_text([world.threads[0]])
    await expect(page.locator(".strategy")).to_have_text(STRATEGY)
    await page.screenshot(path=artifacts / "project.png", full_page=True)

    summary = "Thread crit is handed off; keep the watch thread short."
    view, event = risk_changed(world.project, world.threads, summary)
    await publish(live_api, clickhouse, world.tag, ("project-risk", [view]), event)
    await expect(page.locator(".strategy")).to_have_text(summary, timeout=LIVE_WITHIN_MS)


async def test_the_thread_page_shows_budget_forecast_compaction_checklist_handoff_and_composition(
    live_api: LiveApi, world: World, tab: BrowserContext, artifacts: Path
) -> None:
    page = await signed_in(tab, live_api.url, user_token(world.project), f"#/projects/{world.project}")
    await page.get_by_test_id("next-risk").focus()
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Thread {world.thread}")

    await expect(page.get_by_test_id("percent")).to_have_text("20% left")
    await expect(page.locator(".budget").get_by_role("meter")).to_have_accessible_name("context budget 20%, critical")
    shows = page.get_by_test_id("tool-shows")  # what Codex itself displays, beside the ring, and why they differ
    await expect(shows.get_by_test_id("shown-percent")).to_have_text(f"{round(SHOWN_PCT)}% left")
    await expect(shows).to_contain_text("Codex shows 31% left (gpt-5.3-codex); room before compaction: 20%.")
    await expect(shows.get_by_test_id("shown-why")).to_contain_text("before Codex compacts the thread automatically")
    await expect(page.locator(".budget .level")).to_have_text("critical")
    # where Codex compacts this thread, as the fleet learnt it
    compacts = page.get_by_test_id("compacts-at")
    await expect(compacts).to_contain_text("Auto-compacts at 231k, learnt from 3 compactions since ")
    await expect(compacts).to_contain_text("; was 245k until ")
    point = compaction_point("gpt-5.3-codex", world.project)
    assert await times(compacts) == [point.since, point.moved_at]
    expected = page.get_by_test_id("expected")
    await expect(expected).to_contain_text("between")
    assert await times(expected) == [minute(12), minute(9), minute(16)]
    last = page.get_by_test_id("last-compaction")
    await expect(last).to_contain_text("triggered mid-loop (1 in all)")
    assert await times(last) == [compaction(world.thread, world.project).completed_at]
    await expect(page.get_by_test_id("handoff")).to_have_text(f"hp-{world.thread}: ready")
    checklist = page.get_by_test_id("checklist")
    await expect(checklist.get_by_role("list", name="Files")).to_have_text("a.py")
    await expect(checklist).to_contain_text("write the handoff summary and continue in a relay thread")
    await expect(page.get_by_role("list", name="Pending master actions")).to_contain_text("pre compaction wrap up")

    composition = page.get_by_test_id("composition")
    await expect(composition.get_by_role("heading")).to_have_text("Context composition (estimates)")
    await expect(composition).to_contain_text(f"Window: {WINDOW_TOKENS:,} tokens (estimated)")
    bars = composition.locator(".bars > li")
    assert await bars.evaluate_all("rows => rows.map(r => r.dataset.section)") == [s.key for s in SECTIONS]
    widths = await bars.locator(".bar-fill").evaluate_all("bars => bars.map(b => parseFloat(b.style.width))")
    assert widths == pytest.approx([100 * s.tokens / WINDOW_TOKENS for s in SECTIONS], abs=1e-3)
    await expect(bars.nth(2)).to_contain_text("Messages (412)178,300 tokens · 69.0%")
    await page.screenshot(path=artifacts / "thread.png", full_page=True)


async def test_a_user_of_another_project_sees_nothing_of_this_one(
    live_api: LiveApi, world: World, tab: BrowserContext, clickhouse: Any
) -> None:
    list_reads: list[str] = []
    settled = asyncio.Event()  # the first read, and the one after the stream opened (closing the gap between them)

    def on_request(request: Any) -> None:
        if "/api/v1/conversations" in request.url:
            list_reads.append(request.url)
            if len(list_reads) == 2:
                settled.set()

    tab.on("request", on_request)
    page = await signed_in(tab, live_api.url, user_token(world.other_project))
    rows = page.locator("ol.conversations > li")
    await expect(rows).to_have_count(1)
    await expect(rows).to_have_attribute("data-conversation-id", world.other_conversation.conversation_id)
    async with asyncio.timeout(5):
        await settled.wait()

    # This project's event, then one of the other project's on the same partition: once the second shows, the
    # first would have arrived too (an unknown conversation makes the page read the list again).
    theirs, hidden = indicator_changed(world.conversation("critical"), 11, "critical", minute(6))
    await publish(live_api, clickhouse, world.tag, ("conversation-indicators", [theirs]), hidden)
    own, shown = indicator_changed(world.other_conversation, 45, "watch", minute(6))
    await publish(live_api, clickhouse, world.tag, ("conversation-indicators", [own]), shown)
    await expect(rows.get_by_role("meter")).to_have_accessible_name("context budget 45%, watch", timeout=LIVE_WITHIN_MS)
    assert len(list_reads) == 2
    assert world.project not in await page.content()

    for route, what in ((f"#/projects/{world.project}", "project"), (f"#/threads/{world.thread}", "thread")):
        await page.goto(f"{live_api.url}/{route}")
        await expect(page.get_by_role("heading", level=1)).to_have_text(f"{what} not found")
        assert STRATEGY not in await page.content()


async def test_a_refused_token_asks_for_another(live_api: LiveApi, tab: BrowserContext) -> None:
    page = await tab.new_page()
    await page.goto(live_api.url)
    await page.get_by_label("Bearer token").fill("not-a-token")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("alert")).to_contain_text("refused this token")
    await expect(page.get_by_label("Bearer token")).to_be_focused()
    assert await page.evaluate("sessionStorage.length") == 0


STREAM = (
    "retry: 2000\n: heartbeat\nid: 0:5\n\n"
    'id: 0:6\nevent: conversation.context_indicator.updated\ndata: {"a":1}\n\n'
    ": comment\r\nid: 0:7,1:2\r\nevent: x\r\ndata: line1\r\ndata:line2\r\n\r\n"
    "data: no event name\rid: 9\r\r"
)
PARSED = {
    "events": [
        {"type": "conversation.context_indicator.updated", "data": '{"a":1}', "id": "0:6"},
        {"type": "x", "data": "line1\nline2", "id": "0:7,1:2"},
        {"type": "message", "data": "no event name", "id": "9"},
    ],
    "retries": [2000],
    "lastEventId": "9",
}


async def test_the_event_stream_parser_gives_the_same_events_however_the_stream_is_chunked(
    live_api: LiveApi, tab: BrowserContext
) -> None:
    page = await tab.new_page()
    await page.goto(live_api.url)
    results = await page.evaluate(
        """async (stream) => {
            const { EventStreamParser } = await import("/static/js/sse.js");
            const parse = (chunks) => {
              const events = [], retries = [];
              const parser = new EventStreamParser((e) => events.push(e), (ms) => retries.push(ms));
              for (const chunk of chunks) parser.feed(chunk);
              return { events, retries, lastEventId: parser.lastEventId };
            };
            const splits = [[...stream]];
            for (let i = 0; i <= stream.length; i++) splits.push([stream.slice(0, i), stream.slice(i)]);
            return splits.map(parse);
        }""",
        STREAM,
    )
    assert len(results) == len(STREAM) + 2
    assert {i: result for i, result in enumerate(results) if result != PARSED} == {}
