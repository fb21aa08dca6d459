"""The web page in a real browser: Debian's Chromium driven by Playwright, against the real API on the test broker.

Playwright's own browser download does not work on the project's machines, so the tests launch the system Chromium
(`CTXBUDGET_CHROMIUM`, default /usr/bin/chromium; `.ci/run` installs it). A missing browser fails the tests.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from api.app import create_app
from api.server import running
from api.settings import ApiSettings
from api.tokens import Role, issue_token
from core.settings import Settings
from streams.topic_admin import ensure_topics
from tests.browser.scenario import World, build_world
from tests.unit.api.fakes import SECRET

CHROMIUM = Path(os.environ.get("CTXBUDGET_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "artifacts" / "browser"
"""Screenshots of the pages, kept after the run for people to look at (var/ is git-ignored)."""
HEARTBEAT_SECONDS = 1.0


class LiveApi:
    """The API under uvicorn on the test broker; `stop` and `start` again on the same port drop every open stream."""

    def __init__(self, settings: Settings, clickhouse: Any) -> None:
        self.settings = settings
        self.clickhouse = clickhouse
        self.port = 0
        self.url = ""
        self._stack: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        app = create_app(
            self.settings, self.clickhouse, ApiSettings(sse_heartbeat_seconds=HEARTBEAT_SECONDS), secret=SECRET
        )
        self._stack = contextlib.AsyncExitStack()
        self.url = await self._stack.enter_async_context(running(app, "127.0.0.1", self.port))
        self.port = int(self.url.rsplit(":", 1)[1])

    async def stop(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None


def user_token(project: str) -> str:
    return issue_token(SECRET, Role.USER, "kris", [project], ttl=timedelta(hours=1))


async def signed_in(tab: BrowserContext, url: str, token: str, route: str = "#/") -> Page:
    """A page of the API at `url` opened at `route`, whose token was typed into the sign-in form, with the live
    stream open."""
    page = await tab.new_page()
    await page.goto(f"{url}/{route}")
    await page.get_by_label("Bearer token").fill(token)
    await page.keyboard.press("Enter")
    await expect(page.locator("#live-status")).to_have_text("live", timeout=15_000)
    return page


def conversation_row(page: Page, conversation_id: str) -> Any:
    return page.locator(f'li[data-conversation-id="{conversation_id}"]')


@pytest.fixture(scope="module")
def world(clickhouse: Any) -> World:
    return build_world(clickhouse)


@pytest.fixture(scope="module")
async def live_api(
    kafka_bootstrap: str, clickhouse: Any, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveApi]:
    """One API for the module's tests (the broker is shared with everything else: few starts)."""
    settings = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        data_dir=tmp_path_factory.mktemp("api"),
        topic_prefix=f"t{uuid.uuid4().hex[:8]}.",
        topic_partitions=2,
    )
    await ensure_topics(settings)
    api = LiveApi(settings, clickhouse)
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (or set CTXBUDGET_CHROMIUM)")
    return CHROMIUM


@pytest.fixture(scope="module")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(chromium), headless=True)
        yield browser
        await browser.close()


@pytest.fixture
async def tab(browser: Browser) -> AsyncIterator[BrowserContext]:
    """A fresh browser context per test (its own sessionStorage: every test signs in); no script may fail in it."""
    context = await browser.new_context(viewport={"width": 1100, "height": 900}, locale="en-GB", timezone_id="UTC")
    errors: list[str] = []
    context.on("page", lambda page: page.on("pageerror", lambda error: errors.append(str(error))))
    yield context
    await context.close()
    assert errors == [], "uncaught errors in the page"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
