"""The relay analytics plots in headless Chromium against the real API, on a simulated fleet's week (tests/browser/
fleet.py): the fleet page (levels over time, the relay share per agent tool) and a thread's budget over time with its
compactions, master actions and packages marked. Screenshots, in colour and as a viewer without colour vision sees
them, go to the test's tmp dir.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Locator, Page, expect

from sinks.migrations import migrate
from tests.browser.conftest import LiveApi, signed_in, user_token
from tests.browser.fleet import Fleet, simulate

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.clickhouse]

LEVEL_COLOURS = {"safe": "#0072b2", "watch": "#d55e00", "urgent": "#009e73", "critical": "#cc79a7"}
"""js/plots.js LEVEL_STYLES; the tools take the same colours in their sorted order (Claude Code, Codex, unknown)."""
MARK_COLOURS = {"budget": "#0072b2", "compaction": "#d55e00", "package": "#009e73", "master_action": "#cc79a7"}


@pytest.fixture(scope="module")
def fleet(clickhouse: Any) -> Fleet:
    migrate(clickhouse)
    tag = uuid.uuid4().hex[:8]
    simulate(clickhouse, f"proj-elsewhere-{tag}", f"e{tag}", seed=1)  # never on this user's page
    return simulate(clickhouse, f"proj-fleet-{tag}", tag)


async def painted(canvas: Locator, colours: list[str]) -> dict[str, int]:
    """How many pixels of the canvas have each colour exactly (a series' markers are filled with it)."""
    return await canvas.evaluate(
        """(canvas, colours) => {
            const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
            const wanted = new Map(colours.map((c) => [parseInt(c.slice(1), 16), c]));
            const counts = Object.fromEntries(colours.map((c) => [c, 0]));
            for (let i = 0; i < data.length; i += 4) {
                const c = wanted.get((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
                if (c && data[i + 3] === 255) counts[c] += 1;
            }
            return counts;
        }""",
        colours,
    )


async def legend_pictures(legend: Locator) -> list[tuple[str, str]]:
    """Each legend entry's name and its picture (the marker's shape and the line's dash), colour left out."""
    return await legend.locator("li").evaluate_all(
        """items => items.map((li) => {
            const marker = li.querySelector("svg > :last-child");
            const line = li.querySelector("svg > line");
            const shape = marker.tagName + (marker.getAttribute("points") || marker.getAttribute("d") || "");
            const hollow = marker.getAttribute("fill") === "#ffffff" ? " hollow" : "";
            const dash = line ? line.getAttribute("stroke-dasharray") || "solid" : "";
            return [li.textContent, `${shape}${hollow} ${dash}`];
        })"""
    )


async def screenshots(page: Page, directory: Path, name: str) -> None:
    """The page as it is, and as someone without colour vision sees it (Chromium's own emulation)."""
    await page.screenshot(path=directory / f"{name}.png", full_page=True)
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Emulation.setEmulatedVisionDeficiency", {"type": "achromatopsia"})
    await page.screenshot(path=directory / f"{name}-achromatopsia.png", full_page=True)
    await cdp.send("Emulation.setEmulatedVisionDeficiency", {"type": "none"})


async def test_the_fleet_page_plots_the_levels_and_the_relay_share_per_tool(
    live_api: LiveApi, fleet: Fleet, tab: BrowserContext, tmp_path: Path
) -> None:
    page = await signed_in(tab, live_api.url, user_token(fleet.project), "#/analytics")
    await expect(page.get_by_role("heading", name="Relay analytics", level=1)).to_be_visible()
    totals = page.get_by_test_id("totals")
    await expect(totals).to_contain_text(f"Compactions{fleet.compactions}")  # this project's only
    await expect(page.get_by_test_id("relay-figures").locator("tbody tr")).to_have_count(len(fleet.groups))

    levels = page.get_by_test_id("levels-plot").locator("canvas")
    await expect(levels).to_have_count(1)
    assert all((await painted(levels, list(LEVEL_COLOURS.values()))).values())  # every level drew its markers
    tools = ["Claude Code", "Codex", "tool unknown"]
    for plot in ("ready-plot", "agent-plot"):
        canvas = page.get_by_test_id(plot).locator("canvas")
        counts = await painted(canvas, list(LEVEL_COLOURS.values())[: len(tools)])
        assert all(counts.values()), (plot, counts)

    # not by colour alone: every series has a picture of its own, and its name beside it
    level_key = await legend_pictures(page.get_by_role("list", name="Levels"))
    assert [name for name, _ in level_key] == list(LEVEL_COLOURS)
    assert len({picture for _, picture in level_key}) == len(level_key)
    tool_key = await legend_pictures(page.get_by_role("list", name="Agent tools").first)
    assert [name for name, _ in tool_key] == tools
    assert len({picture for _, picture in tool_key}) == len(tool_key)
    await screenshots(page, tmp_path, "relay-analytics")


async def test_a_threads_budget_over_time_marks_its_compactions_actions_and_packages(
    live_api: LiveApi, fleet: Fleet, tab: BrowserContext, tmp_path: Path
) -> None:
    thread = fleet.threads[0]
    page = await signed_in(tab, live_api.url, user_token(fleet.project), f"#/threads/{thread}")
    section = page.get_by_test_id("over-time")
    await expect(section.get_by_role("heading", name="Budget over time")).to_be_visible()
    canvas = section.get_by_test_id("budget-plot").locator("canvas")
    await expect(canvas).to_have_count(1)
    counts = await painted(canvas, list(MARK_COLOURS.values()))
    assert all(counts.values()), counts  # the budget line and each kind of mark

    marks = fleet.marks[thread]
    listed = section.get_by_test_id("marks").locator("li")
    await expect(listed).to_have_count(marks["compaction"] + marks["master_action"] + marks["package"])
    for kind in ("compaction", "master_action", "package"):
        await expect(section.locator(f'[data-testid=marks] li[data-kind="{kind}"]')).to_have_count(marks[kind])

    key = await legend_pictures(section.get_by_role("list", name="Budget plot legend"))
    assert len({picture for _, picture in key}) == len(key) == 7
    await screenshots(page, tmp_path, "thread-budget-over-time")


async def test_another_projects_fleet_is_not_on_the_page(live_api: LiveApi, fleet: Fleet, tab: BrowserContext) -> None:
    page = await signed_in(tab, live_api.url, user_token(fleet.project), "#/analytics")
    figures = page.get_by_test_id("relay-figures")
    await expect(figures.locator("tbody tr")).to_have_count(len(fleet.groups))
    await expect(figures).not_to_contain_text("proj-elsewhere")
