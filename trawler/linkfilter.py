"""The link filter: from a page's raw links to new crawl requests. Pure.

Order of the checks is by cost: normalisation first (it is needed for
everything else), then the cheap set and regex checks. Each rejected link is
counted by its reason, so `trawler stats` can say why URLs were left out.
Seen-set dedup is the frontier's job and comes after this filter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest, Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser, host_key


@dataclass(slots=True)
class LinkFilter:
    normalise: Normaliser
    scope: Scope
    traps: TrapRules
    max_depth: int | None
    # Cached robots verdict for a URL, or None when the host's robots.txt is not
    # known yet (then the fetch-time check decides).
    robots_allows: Callable[[str], bool | None]
    max_per_host: int | None = None  # --max-pages-per-host: URLs admitted per host
    rejected: Counter[str] = field(default_factory=Counter)
    admitted: Counter[str] = field(default_factory=Counter)  # per host, this job

    def within_host_budget(self, requests: list[CrawlRequest]) -> list[CrawlRequest]:
        """Admit new (deduplicated) URLs while their host is under its budget."""
        if self.max_per_host is None:
            return requests
        kept = []
        for request in requests:
            if self.admitted[request.host] >= self.max_per_host:
                self.rejected["host_budget"] += 1
                continue
            self.admitted[request.host] += 1
            kept.append(request)
        return kept

    def requests_for(
        self, links: Iterable[Link], parent_url: str, depth: int
    ) -> list[CrawlRequest]:
        """New requests for a page's followable links at ``depth`` (parent depth + 1)."""
        if self.max_depth is not None and depth > self.max_depth:
            return []
        out: list[CrawlRequest] = []
        batch_seen: set[str] = set()
        for link in links:
            if link.nofollow:
                self.rejected["nofollow"] += 1
                continue
            url = self.normalise(link.url)
            if url is None:
                self.rejected["bad_url"] += 1
                continue
            if url in batch_seen:
                continue
            batch_seen.add(url)
            host = host_key(url)  # once: the scope and the request both need it
            reason = self.reject_reason(url, host)
            if reason is not None:
                self.rejected[reason] += 1
                continue
            out.append(CrawlRequest(url, depth, parent_url, host, url_fingerprint(url)))
        return out

    def robots_checked(self, requests: list[CrawlRequest]) -> list[CrawlRequest]:
        """Drop requests a cached robots.txt disallows (the rest is checked at fetch time)."""
        kept = []
        for request in requests:
            if self.robots_allows(request.url) is False:
                self.rejected["robots"] += 1
            else:
                kept.append(request)
        return kept

    def reject_reason(self, url: str, host: str | None = None) -> str | None:
        """Why a normalised URL is not to be crawled, or None; ``host``: its host_key."""
        if not self.scope.allows(url, host):
            return "out_of_scope"
        reason = self.traps.reject_reason(url)
        if reason is not None:
            return reason
        if self.robots_allows(url) is False:
            return "robots"
        return None

    @staticmethod
    def request(url: str, depth: int, parent_url: str | None) -> CrawlRequest:
        return CrawlRequest(url, depth, parent_url, host_key(url), url_fingerprint(url))
