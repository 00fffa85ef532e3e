"""The dashboard in a real browser: Debian's chromium driven by Playwright.

Chromium comes from apt-get when /usr/bin/chromium is missing (as tests/servers.py
installs redis-server); Playwright never downloads a browser. Every page records
its console errors and uncaught exceptions, which a test asserts are none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from tests.servers import ServerUnavailable, apt_install, unavailable

CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 15_000  # the machine is loaded: generous, never a sleep
ROUTES = ("overview", "jobs", "hosts", "workers", "errors", "search", "urls", "admin")


def chromium() -> Path:
    """Debian's chromium, installed with apt-get when missing."""
    if not CHROMIUM.exists():
        apt_install("chromium")
    if not CHROMIUM.exists():
        raise ServerUnavailable("apt-get installed no /usr/bin/chromium")
    return CHROMIUM


@dataclass
class Console:
    """What the page said went wrong: console errors and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))

    def other_than(self, *statuses: int) -> list[str]:
        """The errors but the browser's own line for a response of ``statuses`` (one
        the test asked for, such as a 422 for a bad form)."""
        expected = tuple(f"status of {status} " for status in statuses)
        return [e for e in self.errors if not any(status in e for status in expected)]

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} at {message.location}")


@pytest.fixture(scope="module", name="browser")
def chromium_browser() -> Iterator[Browser]:
    try:
        executable = chromium()
    except ServerUnavailable as exc:
        unavailable("chromium", exc)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # chromium's sandbox refuses root
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(executable), args=args)
        yield launched
        launched.close()


def open_dashboard(browser: Browser, base: str, token: str, route: str = "overview",
                   **context: Any) -> tuple[Page, Console]:  # fmt: skip
    """A fresh browser context on ``route``, the token entered in its dialog."""
    page = browser.new_context(**context).new_page()
    console = Console()
    console.watch(page)
    page.goto(f"{base}/#/{route}")
    enter_token(page, token)
    return page, console


def enter_token(page: Page, token: str) -> None:
    expect(page.locator("#token-input")).to_be_visible(timeout=WAIT_MS)
    page.fill("#token-input", token)
    page.click("#token-save")


def expect_live(page: Page) -> None:
    expect(page.locator("[data-testid=live-status]")).to_have_text("live", timeout=WAIT_MS)


def number(text: str) -> float:
    """'1,234' → 1234.0; '9.3' → 9.3 (the first number shown)."""
    found = re.search(r"-?[\d,]+(?:\.\d+)?", text)
    assert found, text
    return float(found.group(0).replace(",", ""))
