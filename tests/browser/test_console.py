"""The web console in a real browser: Debian's Chromium driven by Playwright (X8).

Nothing downloads a browser: Playwright's driver (in its wheel) is pointed at
``/usr/bin/chromium``, which ``scripts/browser install`` puts there (``make
test`` runs it). Under CI a missing browser fails the run; elsewhere it skips.
Set ``RAGSIFT_CONSOLE_SCREENSHOT=docs/console.png`` to refresh the docs' picture.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ragsift.api.auth import Authenticator
from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.settings import EmbedderSettings, FeedbackSettings, Settings
from tests.factories import embedded_settings

CHROMIUM = Path("/usr/bin/chromium")
IN_SCOPE = "How many days do I have to return the thermostat?"
OUT_OF_SCOPE = "Who won the football world cup in 2014?"
#: how long the page may take to show what the server already sent (a loaded CI box)
UI_TIMEOUT_MS = 20_000
#: the console's C6 red (console.css --red), as the browser computes it
RED = "rgb(180, 35, 24)"


def _browser() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    message = f"no browser at {CHROMIUM}: run `scripts/browser install`"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextlib.asynccontextmanager
async def _served(settings: Settings) -> AsyncIterator[tuple[str, EmbeddedRuntime]]:
    """The console on loopback over a runtime holding the handbook for acme."""
    runtime = EmbeddedRuntime(settings)
    await runtime.ingest("acme", sample_documents())
    app = create_console_app(runtime, auth=Authenticator(None, None, insecure=True))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)  # a free port
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}/console", runtime
    finally:
        await runner.cleanup()
        await runtime.close()


async def _live_page(browser: Any, url: str, errors: list[str]) -> Any:
    """A page on the console, its stream live, asking as tenant acme; page errors
    are appended to ``errors``."""
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(url)
    await expect(page.locator("#conn")).to_have_attribute("data-state", "on", timeout=UI_TIMEOUT_MS)
    await page.fill("#tenant", "acme")
    return page


@pytest.fixture
async def console_url(tmp_path: Path) -> AsyncIterator[str]:
    async with _served(embedded_settings(tmp_path)) as (url, _):
        yield url


async def test_console_shows_badges_banners_and_refusals(console_url: str, tmp_path: Path) -> None:
    browser_path = _browser()
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as pw:
        # --no-sandbox: the tests may run as root in a container, where Chromium's
        # sandbox cannot start; the page is our own, served from loopback.
        browser = await pw.chromium.launch(executable_path=str(browser_path), args=["--no-sandbox"])
        try:
            errors: list[str] = []
            page = await _live_page(browser, console_url, errors)

            await page.fill("#query", IN_SCOPE)
            await page.click("#query-form button")
            answered = page.locator(".card", has_text=IN_SCOPE)
            await expect(answered).to_have_count(1, timeout=UI_TIMEOUT_MS)
            # the hashing embedder's low confidence: answered, advisory only (C6 red + banner)
            await expect(answered.locator(".badge")).to_have_attribute(
                "data-badge", re.compile("^(green|orange|red)$"), timeout=UI_TIMEOUT_MS
            )
            await expect(answered.locator(".banner")).to_be_visible()
            await expect(answered.locator(".banner")).to_contain_text("Advisory only — confidence")
            await expect(answered.locator(".answer")).to_contain_text("30 days")
            await expect(answered).to_have_class("card")  # not a refusal
            await expect(answered.locator(".kept summary")).to_contain_text("kept 8 of 8")
            await expect(answered.locator(".kept li").first).to_contain_text("returns-and-refunds")
            await expect(answered.locator(".dropped summary")).to_have_text("dropped 0")

            await page.fill("#query", OUT_OF_SCOPE)
            await page.click("#query-form button")
            refused = page.locator(".card", has_text=OUT_OF_SCOPE)
            await expect(refused).to_have_class("card refusal", timeout=UI_TIMEOUT_MS)
            await expect(refused.locator(".badge")).to_have_attribute("data-badge", "red")
            await expect(refused.locator(".banner")).to_be_visible()
            await expect(refused.locator(".banner")).to_contain_text("Advisory only")
            await expect(refused.locator(".answer")).to_contain_text(REFUSAL_SENTENCE)
            colour = await refused.locator(".answer").evaluate("e => getComputedStyle(e).color")
            assert colour == RED

            await expect(page.locator("#counters tr[data-tenant='acme']")).to_contain_text("2")
            await expect(page.locator("#evidence li").first).to_be_visible()
            shot = Path(os.environ.get("RAGSIFT_CONSOLE_SCREENSHOT") or tmp_path / "console.png")
            await page.screenshot(path=str(shot))
            assert await asyncio.to_thread(lambda: shot.stat().st_size) > 0
            assert errors == []
        finally:
            await browser.close()


@pytest.fixture
async def calibrated_console(tmp_path: Path) -> AsyncIterator[tuple[str, EmbeddedRuntime]]:
    """The console on the calibrated scorer (whose labels re-fit), every result in the
    label sample (RAGSIFT_FEEDBACK_SAMPLE_SHARE=1)."""
    settings = Settings(
        data_dir=tmp_path,
        embedder=EmbedderSettings(kind="hashing"),
        feedback=FeedbackSettings(sample_share=1.0),
    )
    async with _served(settings) as served:
        yield served


async def test_a_card_is_labelled_from_the_page(
    calibrated_console: tuple[str, EmbeddedRuntime],
) -> None:
    browser_path = _browser()
    from playwright.async_api import async_playwright, expect

    url, runtime = calibrated_console
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(browser_path), args=["--no-sandbox"])
        try:
            errors: list[str] = []
            page = await _live_page(browser, url, errors)
            await page.fill("#query", IN_SCOPE)
            await page.click("#query-form button")
            answered = page.locator(".card", has_text=IN_SCOPE)
            label = answered.locator(".label")
            await expect(label).to_be_visible(timeout=UI_TIMEOUT_MS)
            # the decision (sampled: the share is 1) arrives on the stream
            await expect(answered.locator(".decision")).to_be_visible(timeout=UI_TIMEOUT_MS)
            await label.locator("button[data-relevant='true']").click()
            await expect(label.locator(".status")).to_have_text(
                "labelled yes (sampled)", timeout=UI_TIMEOUT_MS
            )
            query_id = await answered.get_attribute("data-query-id")
            assert query_id is not None
            loop = runtime.feedback
            assert loop is not None
            record = loop.store.recall(query_id, "acme")
            assert record is not None
            [held] = loop.store.labels(loop.scope_of(record))
            assert held.relevant
            assert held.sampled
            assert errors == []
        finally:
            await browser.close()
