"""The web console in a real browser: Debian's Chromium driven by Playwright (X8).

Nothing downloads a browser: Playwright's driver (in its wheel) is pointed at
``/usr/bin/chromium``, which ``scripts/browser install`` puts there (``make
test`` runs it). Under CI a missing browser fails the run; elsewhere it skips.
Set ``RAGSIFT_CONSOLE_SCREENSHOT=docs/console.png`` to refresh the docs' picture.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from ragsift.api.auth import Authenticator
from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
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


@pytest.fixture
async def console_url(tmp_path: Path) -> AsyncIterator[str]:
    runtime = EmbeddedRuntime(embedded_settings(tmp_path))
    await runtime.ingest("acme", sample_documents())
    app = create_console_app(runtime, auth=Authenticator(None, None, insecure=True))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)  # a free port
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}/console"
    finally:
        await runner.cleanup()
        await runtime.close()


async def test_console_shows_badges_banners_and_refusals(console_url: str, tmp_path: Path) -> None:
    browser_path = _browser()
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as pw:
        # --no-sandbox: the tests may run as root in a container, where Chromium's
        # sandbox cannot start; the page is our own, served from loopback.
        browser = await pw.chromium.launch(executable_path=str(browser_path), args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(console_url)
            await expect(page.locator("#conn")).to_have_attribute(
                "data-state", "on", timeout=UI_TIMEOUT_MS
            )
            await page.fill("#tenant", "acme")

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
