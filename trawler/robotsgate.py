"""The robots.txt gate of the crawl loop: one robots.txt per origin, fetched under
the host's politeness slot before any other request to it, cached, and asked
about every URL (RFC 9309; what each fetch outcome means is robotscache.py)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from enum import Enum
from functools import partial

from trawler.fetch import Fetcher
from trawler.frontier.base import Frontier
from trawler.records import FetchResult
from trawler.robotscache import CACHE_TTL_S, RobotsEntry, entry_from_fetch
from trawler.urls import origin


class Verdict(Enum):
    ALLOW = "allow"
    DISALLOW = "disallow"
    LATER = "later"  # robots.txt unavailable for now: try the URL again later
    UNAVAILABLE = "unavailable"  # robots.txt never became available
    FAILED = "failed"  # the origin cannot be fetched at all (dns, private address)


class RobotsGate:
    def __init__(
        self,
        fetcher: Fetcher,
        user_agent: str,
        retry_waits_s: tuple[float, ...],
        counters: Counter[str],
        on_first_fetch: Callable[[str, RobotsEntry], Awaitable[None]],
    ) -> None:
        self.fetcher = fetcher
        self.user_agent = user_agent
        self.retry_waits_s = retry_waits_s
        self.counters = counters
        self.on_first_fetch = on_first_fetch  # e.g. queue the origin's sitemaps
        self._entries: dict[str, RobotsEntry] = {}

    async def verdict(self, url: str, host: str, frontier: Frontier) -> Verdict:
        """The verdict for ``url``; fetches robots.txt when missing or stale, under
        the host's slot, which the caller holds."""
        site = origin(url)
        entry = previous = self._entries.get(site)
        if entry is None or entry.expired(time.monotonic()):
            entry = await self._fetch(site, host, frontier, previous)
            if previous is None:
                await self.on_first_fetch(site, entry)
        if entry.fatal_error is not None:
            return Verdict.FAILED
        if entry.unavailable:
            return Verdict.UNAVAILABLE if entry.gave_up else Verdict.LATER
        return Verdict.ALLOW if entry.rules.allowed(url) else Verdict.DISALLOW

    async def _fetch(
        self, site: str, host: str, frontier: Frontier, previous: RobotsEntry | None
    ) -> RobotsEntry:
        """From the workers' shared cache if another fetched it, else over the network."""
        shared = await self._shared(site, frontier)
        result = shared or await self._download(site, host, frontier)
        entry = entry_from_fetch(
            result, self.user_agent, time.monotonic(), previous, self.retry_waits_s
        )
        if shared is None:  # downloaded here: share it for as long as it is valid
            ttl_s = entry.retry_at - entry.fetched_at if entry.unavailable else CACHE_TTL_S
            await frontier.share_robots(site, result.status, result.error, result.body, ttl_s)
        self._entries[site] = entry
        frontier.set_crawl_delay(host, entry.rules.crawl_delay)
        return entry

    async def _shared(self, site: str, frontier: Frontier) -> FetchResult | None:
        shared = await frontier.shared_robots(site)
        if shared is None:
            return None
        status, error, body = shared
        self.counters["robots.shared"] += 1
        return FetchResult(site + "/robots.txt", site + "/robots.txt", status=status,
                           error=error, body=body)  # fmt: skip

    async def _download(self, site: str, host: str, frontier: Frontier) -> FetchResult:
        await frontier.wait_host_ready(host)
        result = await self.fetcher.fetch_robots(
            site + "/robots.txt", on_sent=partial(frontier.record_sent, host)
        )
        frontier.record_response(host, result.status, result.error, result.retry_after_s)
        self.counters["robots.fetched"] += 1
        return result

    def failure(self, url: str) -> FetchResult:
        """The recorded result for a URL whose origin cannot be fetched at all."""
        error = self._entries[origin(url)].fatal_error
        return FetchResult(url, url, error=error, error_detail=f"robots.txt fetch failed: {error}")

    def retry_in(self, url: str) -> float:
        entry = self._entries[origin(url)]
        return max(entry.retry_at - time.monotonic(), 0.0)

    def allows(self, url: str) -> bool | None:
        """Cached verdict for the link filter; None when robots.txt is not known yet."""
        entry = self._entries.get(origin(url))
        if entry is None or entry.unavailable:
            return None
        return entry.rules.allowed(url)
