"""Rendering one page: the fetched response loaded in a fresh context, every other
request routed through the crawler, the DOM read once the page has settled.

The page's own document is never fetched twice: the browser is answered with the
response the crawler already has. Every other request is either refused
(routing.py) or handed to ``SubresourceFetch``, the crawler's fetch path, which
holds the host's slot, checks robots.txt and the private-network guard: the
browser sends nothing itself. Those fetches run one at a time per page (the
page's host has one request in flight, as for plain fetches), and none is left
running when ``render_page`` returns: the caller releases the host after it.

"Settled": the load event, then up to ``SCROLLS`` scrolls to the bottom (pages
that load more links on scroll) while the document keeps growing and is taller
than the window, each followed by a pause for the network to go quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from trawler.records import FetchResult
from trawler.render.cache import SubresourceCache
from trawler.render.routing import refusal

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Route

log = logging.getLogger("trawler")

SCROLLS = 3
QUIET_S = 0.3  # no request for this long: the page is done with the network
_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_GROWTH = "document.documentElement.scrollHeight"
_SIZES = f"[{_GROWTH}, window.innerHeight]"


class SubresourceFetch(Protocol):
    async def __call__(self, url: str) -> FetchResult | str:
        """Fetch ``url`` for a rendered page, politely; or a reason it may not be."""


@dataclass(slots=True)
class PageRender:
    """What rendering one page produced."""

    dom: bytes | None = None  # the serialised DOM, UTF-8; None when it failed
    error: str | None = None  # "render_timeout", "render_crash"
    subresources: list[FetchResult] = field(default_factory=list)  # fetched, in order
    refused: Counter[str] = field(default_factory=Counter)  # by reason


@dataclass(slots=True)
class _Routes:
    """The interception of one page's requests."""

    page: FetchResult
    page_host: str
    mode: str
    fetch: SubresourceFetch
    out: PageRender
    cache: SubresourceCache | None = None  # the job's scripts and stylesheets
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one fetch at a time
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    last_activity: float = 0.0
    closed: bool = False  # the render ended: nothing more is fetched
    document_served: bool = False

    async def handle(self, route: Route) -> None:
        request = route.request
        self.last_activity = asyncio.get_running_loop().time()
        if not self.document_served and request.is_navigation_request():
            self.document_served = True  # the first request is the page's own document
            await _fulfil(route, self.page)
            return
        reason = refusal(request.url, request.resource_type, self.page_host, self.mode)
        if reason is not None or request.method not in ("GET", "HEAD"):
            self.out.refused[reason or "method"] += 1
            await _abort(route)
            return
        cached = self.cache.get(request.url, request.resource_type) if self.cache else None
        if cached is not None:  # fetched for an earlier page of the job: no request
            await _fulfil(route, cached)
            return
        await self._fetch(route)

    async def _fetch(self, route: Route) -> None:
        async with self.lock:
            if self.closed:
                await _abort(route)
                return
            got = await self.fetch(route.request.url)
        if isinstance(got, str):
            self.out.refused[got] += 1
            await _abort(route)
            return
        self.out.subresources.append(got)
        if self.cache is not None:
            self.cache.put(route.request.url, route.request.resource_type, got)
        if got.status is None:
            await _abort(route)
        else:
            await _fulfil(route, got)
        self.last_activity = asyncio.get_running_loop().time()

    async def close(self) -> None:
        """Stop fetching; cancel a fetch in flight (its connection is dropped, so no
        request of this page is left running) and wait for it to end."""
        self.closed = True
        pending = list(self.tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


async def render_page(
    ctx: BrowserContext, page_result: FetchResult, page_host: str, mode: str,
    fetch: SubresourceFetch, timeout_s: float, cache: SubresourceCache | None = None,
) -> PageRender:  # fmt: skip
    """Render ``page_result`` (a fetched HTML response) in ``ctx``; ``cache``: the
    scripts and stylesheets of the job's earlier pages (render/cache.py)."""
    out = PageRender()
    routes = _Routes(page_result, page_host, mode, fetch, out, cache)
    page = await ctx.new_page()
    await ctx.route("**/*", _spawned(routes))
    try:  # asyncio.timeout, not wait_for: a stop's cancel is not lost (slowstop.py)
        async with asyncio.timeout(timeout_s):
            out.dom = await _settle(page, page_result.final_url, routes)
    except TimeoutError:
        out.error = "render_timeout"
    except Exception as exc:  # noqa: BLE001 - a crashed page or browser costs this page
        log.info("render failed on %s: %s", page_result.url, " ".join(str(exc).split())[:200])
        out.error = "render_crash"
    finally:
        await routes.close()
    return out


def _spawned(routes: _Routes) -> Callable[[Route], Awaitable[None]]:
    """Playwright awaits a route handler before it delivers the next event; each
    runs as a task of its own so ``close()`` can cancel the one in flight."""

    async def handler(route: Route) -> None:
        task = asyncio.ensure_future(routes.handle(route))
        routes.tasks.add(task)
        task.add_done_callback(routes.tasks.discard)

    return handler


async def _settle(page: Page, url: str, routes: _Routes) -> bytes:
    await page.goto(url, wait_until="load")
    await _quiet(routes)
    height, viewport = await page.evaluate(_SIZES)
    for _ in range(SCROLLS):
        if height <= viewport:  # nothing to scroll: no scroll event, no quiet to wait
            break
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        await _quiet(routes)
        grown = await page.evaluate(_GROWTH)
        if grown <= height:
            break
        height = grown
    html: str = await page.content()
    return html.encode("utf-8", "replace")


async def _quiet(routes: _Routes) -> None:
    """Wait until no request has come or gone for ``QUIET_S`` and none is running."""
    loop = asyncio.get_running_loop()
    routes.last_activity = loop.time()
    while routes.tasks or loop.time() - routes.last_activity < QUIET_S:
        await asyncio.sleep(QUIET_S / 3)


async def _fulfil(route: Route, result: FetchResult) -> None:
    # The body is handed over decoded and whole: no framing or coding headers.
    headers = {name: value for name, value in result.headers if name.lower() not in _FRAMING}
    with contextlib.suppress(Exception):  # the page may be gone already
        await route.fulfill(status=result.status or 200, headers=headers, body=result.body)


async def _abort(route: Route) -> None:
    with contextlib.suppress(Exception):
        await route.abort("blockedbyclient")
