"""The dashboard's reach: a phone's width, light and dark themes with readable
contrast, the keyboard alone (real chromium, real `trawler serve`)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.api_server import ServeProcess
from tests.e2e.browser import (
    ROUTES,
    WAIT_MS,
    chromium_browser,  # noqa: F401  (the fixture `browser`)
    expect_live,
    open_dashboard,
)
from tests.e2e.conftest import Served
from tests.e2e.dashboard_servers import (  # noqa: F401  (the fixtures finished, live, site)
    dashboard_site,
    finished_server,
    jobs_now,
    live_server,
)

# Per view, what shows once its data is in (the widest content a phone must fit).
LOADED = {
    "overview": "svg[data-testid=throughput-chart] polyline",
    "jobs": "tr[data-job-id], [data-testid=job-detail] dl",
    "hosts": "tr[data-host], [data-testid=host-fetches] tbody tr td.url",
    "workers": "tr[data-worker-id]",
    "errors": "[data-testid=errors-feed] tbody tr",
    "search": "#search-q",
    "search?q": "[data-testid=search-results] li",
    "urls": "#url-input",
    "urls?url": "[data-testid=url-fetches] tbody tr",
    "admin": "[data-testid=politeness-answer]:not(:empty)",
}

# The first test of a module may wait for apt-get to install chromium (about a
# minute on a fresh machine): its setup counts in its timeout.
pytestmark = pytest.mark.timeout(300)


PHONE_WIDTH = 390


def _assert_no_page_scroll(page: Page) -> None:
    # Against the phone's width itself: a mobile browser widens innerWidth (it zooms
    # out) to fit a page that overflows.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE_WIDTH, (page.url, width)


def test_a_phone_has_no_page_level_horizontal_scroll(
    browser: Browser, finished: tuple[ServeProcess, str]
) -> None:
    serve, site_base = finished
    base = serve.base
    phone = {"viewport": {"width": PHONE_WIDTH, "height": 844}, "device_scale_factor": 2,
             "is_mobile": True, "has_touch": True}  # fmt: skip
    page, console = open_dashboard(browser, base, serve.token, **phone)
    expect_live(page)
    job_id = jobs_now(serve)[0]["id"]
    long_url = f"{site_base}/private/x"
    for route in (*ROUTES, f"jobs/{job_id}", f"hosts/{site_base.split('//')[1]}?job={job_id}",
                  f"urls?url={long_url}", "search?q=pilot"):  # fmt: skip
        page.goto(f"{base}/#/{route}")
        loaded = LOADED.get(route.split("=")[0]) or LOADED[route.split("/")[0]]
        expect(page.locator(loaded).first).to_be_attached(timeout=WAIT_MS)
        _assert_no_page_scroll(page)
    assert console.errors == []
    page.context.close()


def _contrast(page: Page, selector: str) -> float:
    """WCAG 2 contrast ratio of an element's text against the page's background."""
    return float(
        page.evaluate(
            """(selector) => {
        const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 3).map(Number);
        const lum = ([r, g, b]) => [r, g, b].map((v) => {
            const c = v / 255;
            return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
        }).reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
        const fg = lum(rgb(getComputedStyle(document.querySelector(selector)).color));
        const bg = lum(rgb(getComputedStyle(document.body).backgroundColor));
        return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    }""",
            selector,
        )
    )


def test_the_theme_follows_the_system_and_toggles_with_readable_contrast(
    browser: Browser, live: ServeProcess
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, color_scheme="dark")
    html = page.locator("html")
    expect(html).to_have_attribute("data-theme", "dark", timeout=WAIT_MS)
    dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    for selector in ("main h1", ".card .label", "nav a[href='#/jobs']"):
        assert _contrast(page, selector) >= 4.5, ("dark", selector)
    page.keyboard.press("Tab")  # the skip link first
    page.focus("#theme-toggle")
    page.keyboard.press("Enter")
    expect(html).to_have_attribute("data-theme", "light")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != dark_bg
    for selector in ("main h1", ".card .label", "nav a[href='#/jobs']"):
        assert _contrast(page, selector) >= 4.5, ("light", selector)
    page.reload()  # the choice is kept
    expect(html).to_have_attribute("data-theme", "light", timeout=WAIT_MS)
    assert console.errors == []
    page.context.close()


def _tab_to(page: Page, selector: str, presses: int = 60) -> None:
    """Tab until ``selector`` has the focus (bounded)."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
    raise AssertionError(f"{selector} never got the focus by Tab")


def test_the_nav_and_the_create_form_work_by_keyboard(
    browser: Browser, live: ServeProcess, site: Served
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token)
    expect_live(page)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.evaluate("document.activeElement.blur()")
    _tab_to(page, 'nav a[href="#/jobs"]')
    page.keyboard.press("Enter")
    expect(page.locator("table[data-testid=jobs-table]")).to_be_visible(timeout=WAIT_MS)
    _tab_to(page, "#job-form [name=seeds]")
    page.keyboard.type(site.seeds[0])
    _tab_to(page, "#job-form [name=max_pages]")
    page.keyboard.type("5")
    _tab_to(page, "#job-form [name=allow_private]")
    page.keyboard.press("Space")
    _tab_to(page, "#job-form button[type=submit]")
    page.keyboard.press("Enter")
    expect(page.locator("[data-testid=form-error]")).to_have_text("")
    expect(page.locator("main .notice").first).to_contain_text("created", timeout=WAIT_MS)
    newest = jobs_now(serve)[0]
    assert newest["options"]["max_pages"] == 5
    assert console.errors == []
    page.context.close()
