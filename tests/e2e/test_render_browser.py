"""The renderer's browser side (render/browser.py, render/session.py) against Debian's
chromium: requests routed to the crawler, refused ones, timeouts, restarts, crashes.
The crawler's fetch path is a fake here; test_render_crawl.py runs the real one."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.browser import chromium
from tests.servers import ServerUnavailable, unavailable
from trawler.records import FetchResult
from trawler.render.browser import (
    BrowserOptions,
    BrowserPool,
    RenderUnavailable,
    browser_pids,
    browser_rss_bytes,
    check_available,
)
from trawler.render.routing import ALL, SAME_HOST
from trawler.render.session import PageRender, render_page

pytestmark = pytest.mark.timeout(90)

SHELL = (
    b'<html><body><div id="root"></div><script src="/app.js"></script>'
    b'<img src="/logo.png"><script src="http://cdn.test/lib.js"></script></body></html>'
)
APP = b"""fetch('/links.json').then(r => r.json()).then(d => {
  document.getElementById('root').innerHTML =
    d.map(l => '<a href="' + l + '">' + l + '</a>').join('');
});"""
BODIES = {
    "http://site.test/app.js": (b"application/javascript", APP),
    "http://site.test/links.json": (b"application/json", b'["/a", "/b"]'),
    "http://cdn.test/lib.js": (b"application/javascript", b"window.lib = 1;"),
}


def html(url: str, body: bytes) -> FetchResult:
    return FetchResult(url, url, 200, [("Content-Type", "text/html")], "text/html", body=body)


class FakeFetch:
    """The crawler's fetch path as the session sees it; remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, url: str) -> FetchResult | str:
        self.asked.append(url)
        if url not in BODIES:
            return "not_found"
        kind, body = BODIES[url]
        return FetchResult(url, url, 200, [("Content-Type", kind.decode())], kind.decode(),
                           body=body)  # fmt: skip


@pytest.fixture(name="pool")
async def browser_pool() -> AsyncIterator[BrowserPool]:
    try:
        executable = chromium()
    except ServerUnavailable as exc:
        unavailable("chromium", exc)
    pool = BrowserPool(BrowserOptions(concurrency=2, restart_every_pages=3, executable=executable))
    await pool.start()
    try:
        yield pool
    finally:
        await pool.close()


async def render(pool: BrowserPool, page: FetchResult, fetch: FakeFetch, mode: str = SAME_HOST,
                 timeout_s: float = 20.0) -> PageRender:  # fmt: skip
    async with pool.context() as ctx:
        return await render_page(ctx, page, "site.test", mode, fetch, timeout_s)


async def test_script_links_come_through_the_crawler(pool: BrowserPool) -> None:
    fetch = FakeFetch()
    out = await render(pool, html("http://site.test/", SHELL), fetch)
    assert out.error is None and out.dom is not None
    assert b'<a href="/a">/a</a><a href="/b">/b</a>' in out.dom
    # The page itself was not fetched again; no image, nothing of another host.
    assert fetch.asked == ["http://site.test/app.js", "http://site.test/links.json"]
    assert out.refused == {"resource_type": 1, "third_party": 1}
    assert [r.url for r in out.subresources] == fetch.asked


async def test_all_lets_other_hosts_through_the_crawler(pool: BrowserPool) -> None:
    fetch = FakeFetch()
    out = await render(pool, html("http://site.test/", SHELL), fetch, ALL)
    assert "http://cdn.test/lib.js" in fetch.asked
    assert out.refused == {"resource_type": 1}


async def test_a_page_that_never_settles_times_out_and_the_next_renders(
    pool: BrowserPool,
) -> None:
    hung = html("http://site.test/hang", b"<p>x</p><script>while (true) {}</script>")
    out = await render(pool, hung, FakeFetch(), timeout_s=2.0)
    assert out.error == "render_timeout" and out.dom is None
    out = await render(pool, html("http://site.test/", SHELL), FakeFetch())
    assert out.error is None and b'href="/a"' in (out.dom or b"")


async def test_a_killed_browser_costs_one_page(pool: BrowserPool) -> None:
    hung = html("http://site.test/hang", b"<script>while (true) {}</script>")
    rendering = asyncio.create_task(render(pool, hung, FakeFetch(), timeout_s=30.0))
    await asyncio.sleep(1.5)
    for pid in browser_pids():
        os.kill(pid, signal.SIGKILL)
    out = await rendering
    assert out.error in ("render_crash", "render_timeout")
    out = await render(pool, html("http://site.test/", SHELL), FakeFetch())
    assert out.error is None and b'href="/a"' in (out.dom or b"")
    assert pool.restarts >= 1


async def test_the_browser_restarts_every_n_pages(pool: BrowserPool) -> None:
    pages = [html(f"http://site.test/{i}", b"<p>static</p>") for i in range(7)]
    for page in pages:
        assert (await render(pool, page, FakeFetch())).error is None
    assert pool.restarts == 2  # after pages 3 and 6
    assert 0 < browser_rss_bytes() < 2 * 1024**3


def test_missing_chromium_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(RenderUnavailable) as caught:
        check_available(tmp_path / "chromium")
    assert str(caught.value) == (
        f"--render needs chromium at {tmp_path / 'chromium'}: apt-get install chromium"
    )


async def test_a_browser_that_will_not_start_is_a_one_line_error(tmp_path: Path) -> None:
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    pool = BrowserPool(BrowserOptions(executable=broken))
    with pytest.raises(RenderUnavailable) as caught:
        await pool.start()
    assert str(caught.value).startswith("cannot start chromium for --render: ")
    assert "\n" not in str(caught.value)
