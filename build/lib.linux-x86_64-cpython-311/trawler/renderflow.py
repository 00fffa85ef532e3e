"""The crawl's rendering stage (issue 16): which fetched pages go to the browser,
and the fetch path of the requests a rendered page makes.

The engine calls ``Rendering.render`` right after a page's response, while it
still holds the page's host: every request the page makes goes through here, one
at a time, under that host's slot (``wait_host_ready``, ``record_sent``), after
robots.txt allows it, through the crawler's fetcher with its private-network
guard. A subresource of another host (``--render-resources all``) takes that
host's slot (``acquire_host``) for its fetch, as a redirect hop would. So a
rendered page keeps every politeness rule a plain fetch keeps.

What comes out is written on the page's ``FetchResult``: the decision
(``rendered``), the DOM the analysis then parses instead of the body, and the
subresources fetched (archived beside the page). A failed render (timeout, crash)
leaves the static page to be analysed, marked ``failed``: it costs that page its
rendering, never the crawl.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from functools import partial
from pathlib import Path

from trawler.charset import decode_html
from trawler.config import CrawlConfig
from trawler.fetch import Fetcher
from trawler.frontier.base import Frontier
from trawler.outcome import HTML_TYPES, sniffed_type
from trawler.parse import parse_html
from trawler.records import CrawlRequest, FetchResult
from trawler.render import shell
from trawler.render.browser import CHROMIUM, BrowserOptions, BrowserPool, SharedBrowser
from trawler.render.cache import SubresourceCache
from trawler.render.routing import host_key_of
from trawler.render.session import PageRender, render_page
from trawler.robotsgate import RobotsGate, Verdict
from trawler.urls import Normaliser

log = logging.getLogger("trawler")


def render_bytes(result: FetchResult) -> int:
    """What a rendered page holds beyond its response until its commit: the DOM and
    the subresources (counted against the analysis queue's bytes, as bodies are)."""
    if result.dom is None and not result.subresources:
        return 0
    held = sum(len(sub.body) + len(sub.raw_body) for sub in result.subresources)
    return held + len(result.dom or b"")


def browser_options(config: CrawlConfig, executable: Path = CHROMIUM) -> BrowserOptions:
    return BrowserOptions(
        concurrency=config.render_concurrency,
        restart_every_pages=config.render_restart_pages,
        max_rss_bytes=config.render_max_memory_mb * 1024 * 1024,
        executable=executable,
        user_agent=config.user_agent,
    )


class Rendering:
    """One crawl's renderer: its share of the process's browser (services.py), its
    own limit on pages rendered at a time, and what each host has taught it.

    What ``auto`` learns of a host is kept by the frontier (``count_render_miss``):
    in the data directory across restarts (embedded), in Redis for every worker of
    the job (distributed), and read back from it before each decision.
    """

    def __init__(self, config: CrawlConfig, fetcher: Fetcher, robots: RobotsGate,
                 counters: Counter[str], browser: SharedBrowser) -> None:  # fmt: skip
        self.config = config
        self.fetcher = fetcher
        self.robots = robots
        self.counters = counters
        self.learning = shell.HostLearning(config.render_host_misses)
        self.browser = browser
        self.pool: BrowserPool | None = None
        self._contexts = asyncio.Semaphore(config.render_concurrency)  # this job's pages
        self.cache = SubresourceCache()  # scripts and stylesheets, fetched once per job
        self.normalise = Normaliser(config.tracking_params)

    async def start(self) -> None:
        """Get the process's browser, launched if need be (``RenderUnavailable``)."""
        self.pool = await self.browser.get(browser_options(self.config))

    @staticmethod
    def wants(request: CrawlRequest, result: FetchResult) -> bool:
        """Only pages answered 2xx with HTML are considered (not sitemaps, not errors)."""
        return (
            request.kind == "page"
            and result.ok
            and sniffed_type(result.content_type, result.body) in HTML_TYPES
        )

    async def render(self, request: CrawlRequest, result: FetchResult, frontier: Frontier) -> None:
        """Decide, render when decided, and write the outcome on ``result``."""
        decision = result.rendered = await self._decide(request, result, frontier)
        if decision is None:
            return
        self.counters[f"render.{decision}"] += 1
        if decision != shell.RENDERED:
            return
        fetch = partial(self._subresource, request.host, frontier)
        config = self.config
        assert self.pool is not None, "start() first"
        try:
            async with self._contexts, self.pool.context(config.user_agent) as ctx:
                out = await render_page(ctx, result, request.host, config.render_resources,
                                        fetch, config.render_timeout_s, self.cache)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the browser would not start: this page only
            log.warning("render: no browser for %s: %s", request.url, " ".join(str(exc).split()))
            out = PageRender(error="render_crash")
        self._take(request, result, out)
        if self.config.render == shell.AUTO and result.dom is not None:
            await frontier.count_render_miss(request.host, self._added(result))

    async def _decide(self, request: CrawlRequest, result: FetchResult, frontier: Frontier
                      ) -> str | None:  # fmt: skip
        """The host's count is read from the frontier each time: an earlier run or
        another worker of the job (the host held by one at a time) may have added to it."""
        html, _ = decode_html(result.body, result.charset)
        if self.config.render == shell.AUTO:
            misses = await frontier.render_misses(request.host)
            self.learning.set(request.host, misses.get(request.host, 0))
        return shell.decide(self.config.render, request.host, html, self.learning)

    def _take(self, request: CrawlRequest, result: FetchResult, out: PageRender) -> None:
        result.subresources = out.subresources
        self.counters["render.subresources"] += len(out.subresources)
        for reason, count in out.refused.items():
            self.counters[f"render.refused.{reason}"] += count
        if out.dom is None:
            result.rendered = shell.FAILED
            self.counters[f"render.{out.error}"] += 1
            return
        result.dom = out.dom

    def _added(self, result: FetchResult) -> bool:
        """Whether the DOM showed a link or text the static HTML lacked. Parsed here,
        on the loop: ~1 ms for both against the ~1 s the render took."""
        config, token = self.config, self.config.robots_token
        static = parse_html(result.body, result.final_url, result.charset,
                            config.max_links_per_page, token)  # fmt: skip
        assert result.dom is not None
        dom = parse_html(result.dom, result.final_url, "utf-8", config.max_links_per_page, token)
        return shell.render_added(static, dom)

    async def _subresource(self, page_host: str, frontier: Frontier, url: str) -> FetchResult | str:
        """Fetch one request of a page rendered while ``page_host`` is held; another
        host's slot is taken for the fetch and released after it."""
        host = host_key_of(url)
        if host == page_host:
            return await self._fetch_held(host, frontier, url)
        await frontier.acquire_host(host)
        try:
            return await self._fetch_held(host, frontier, url)
        finally:
            await frontier.finish_host(host)

    async def _fetch_held(self, host: str, frontier: Frontier, url: str) -> FetchResult | str:
        normalised = self.normalise(url)
        if normalised is None:
            return "bad_url"
        verdict = await self.robots.verdict(normalised, host, frontier)
        if verdict is not Verdict.ALLOW:
            return "robots" if verdict is Verdict.DISALLOW else "robots_unavailable"
        await frontier.wait_host_ready(host)
        result = await self.fetcher.fetch(
            url, hop_check=partial(self._hop_check, host, frontier),
            on_sent=partial(frontier.record_sent, host),
        )  # fmt: skip
        frontier.record_response(host, result.status, result.error, result.retry_after_s)
        return result

    async def _hop_check(self, host: str, frontier: Frontier, target: str) -> str | None:
        """A subresource's redirect is followed on its own host only, robots allowing."""
        url = self.normalise(target)
        if url is None or host_key_of(url) != host:
            return "render_redirect"
        if await self.robots.verdict(url, host, frontier) is not Verdict.ALLOW:
            return "robots"
        await frontier.wait_host_ready(host)
        return None
