"""What a fetched URL adds to the crawl: its page, and the new URLs it leads to;
and the sitemaps an origin's robots.txt names.

The page is analysed off the loop (analysis.py). The URLs it leads to are its
links, a sitemap's entries, a redirect's target and a canonical URL other than
its own (both at the page's depth: other names of the same page). Each goes
through the link filter (scope, traps, depth, robots.txt; linkfilter.py), the
operators' blocklist, the frontier's seen set and the host's page budget, in
that order. Rejections are counted by reason in ``LinkFilter.rejected``; each URL
admitted or left out also gets a provenance row (provenance.py), once a URL.
The page links that reach the seen set are told to the parser processes, which
leave them out of later pages' answers (knownlinks.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from trawler.analysis import AnalysisPool
from trawler.blocklist import Blocklist
from trawler.config import CrawlConfig
from trawler.frontier.base import Frontier
from trawler.frontier.importance import Importance
from trawler.linkfilter import LinkFilter
from trawler.outcome import NOT_HTML
from trawler.provenance import CANONICAL, LINK, REDIRECT, SITEMAP, Found, SkipsKept, trap_rule
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.robotscache import RobotsEntry
from trawler.scope import Scope
from trawler.sitemapflow import sitemaps_of_origin
from trawler.store.base import UrlOutcome
from trawler.urls import host_key


class Discovery:
    def __init__(
        self,
        config: CrawlConfig,
        analysis: AnalysisPool,
        links: LinkFilter,
        scope: Scope,
        blocklist: Blocklist,
        counters: Counter[str],
    ) -> None:
        """``counters``: the crawl's, to which sitemap counters are added."""
        self.config = config
        self.analysis = analysis
        self.links = links
        self.normalise = links.normalise
        self.scope = scope
        self.blocklist = blocklist
        self.counters = counters
        self.seed_hosts: set[str] = set()  # the seeds' hosts, kept with the job
        self.importance: Importance | None = None  # the frontier's (--priority importance)
        self.skips_kept = SkipsKept()
        # The robots.txt rule deciding a URL, with its line (RobotsGate.rule_of).
        self.robots_rule: Callable[[str], str | None] = lambda _url: None
        # Tell the parser processes the links taken (knownlinks.py): the engine's
        # choice, when the frontier's seen set lasts and --priority is not importance.
        self.tell_known = False
        self.robots_generation: Callable[[], int] = lambda: 0  # RobotsGate.generation

    def widen_scope(self, hosts: Iterable[str]) -> None:
        """Seed hosts are in scope, and their sitemaps are read."""
        for host in hosts:
            self.scope.add_host(host)
            self.seed_hosts.add(host)

    async def origin_sitemaps(
        self, site: str, entry: RobotsEntry, frontier: Frontier
    ) -> list[CrawlRequest]:
        """The sitemaps an origin's robots.txt names, when its sitemaps are wanted:
        those of seed hosts, and of every in-scope host unless the scope is "any"."""
        if not self.config.sitemaps:
            return []
        host = host_key(site + "/")
        if host not in self.seed_hosts and (
            self.config.scope == "any" or not self.scope.allows(site + "/")
        ):
            return []
        return await frontier.filter_new(sitemaps_of_origin(site, entry.rules.sitemaps, self.links))

    async def analyse(self, unit: UrlOutcome, frontier: Frontier) -> PageRecord:
        """Fill in the outcome's page and the new URLs found from it; returns the page."""
        request, result = unit.request, unit.result
        assert result is not None
        analysis = await self.analysis.analyse(request, result)
        page = analysis.outcome.page
        rejected = self.links.rejected  # (Counter.update of a dict: an ABC check, a loop)
        for reason, count in analysis.rejected.items():
            rejected[reason] += count
        pairs = zip(analysis.requests, analysis.anchors, strict=False)
        found = Found(request.url, {r.url: anchor for r, anchor in pairs})
        found.skips += [(url, reason, anchor, LINK) for url, reason, anchor in analysis.skipped]
        # The page links that go on to the seen set allowed by robots.txt (not merely
        # not known to be disallowed), under the verdicts' stamp; none while a domain
        # is blocked (told all the same: a new stamp starts a new epoch).
        known: list[int] | None = [] if self.tell_known else None
        stamp = (self.robots_generation(), self.blocklist.generation)
        collect = None if self.blocklist.active else known
        discovered = self._robots_checked(analysis.requests, found, collect)
        if request.kind == "sitemap" and page.error == NOT_HTML:
            page.error = None  # a sitemap is not HTML by nature
            discovered += await self._sitemap(request, result, page, found)
        if analysis.outcome.redirect_to is not None:
            discovered += self._found(self.alias_request(analysis.outcome.redirect_to, request),
                                      REDIRECT, found)  # fmt: skip
        if analysis.canonical_elsewhere is not None:  # then page.duplicate_of too
            discovered += self._found(self._alias(analysis.canonical_elsewhere, request),
                                      CANONICAL, found)  # fmt: skip
        unit.page, unit.edges = page, analysis.edges
        if self.blocklist.active:
            discovered = self._not_blocked(discovered, found)
        fresh = await frontier.filter_new(discovered)
        if known is not None:  # in the seen set now
            self.analysis.tell_known(known, stamp)
        unit.discovered = self.links.within_host_budget(fresh)
        found.left_out(fresh, unit.discovered, "host_budget")
        unit.provenance = found.rows(unit.discovered, self.skips_kept, self.skip_detail)
        if self.importance is not None:  # --priority importance: its cash to its links
            self.importance.spread(request, discovered, unit.discovered)
        return page

    def skip_detail(self, reason: str, url: str) -> str | None:
        """The rule that left ``url`` out for ``reason``, in words (provenance.py)."""
        config = self.config
        if reason == "out_of_scope":
            return self.scope.explain(url)
        if reason == "robots":
            return self.robots_rule(url)
        if reason == "max_depth":
            return f"--max-depth {config.max_depth}"
        if reason == "host_budget":
            return f"--max-pages-per-host {config.max_pages_per_host}"
        if reason == "blocklist":
            return f"host {host_key(url)} is blocked"
        return trap_rule(reason)

    @staticmethod
    def _found(requests: list[CrawlRequest], via: str, found: Found) -> list[CrawlRequest]:
        found.found(requests, via)
        return requests

    def _robots_checked(
        self, requests: list[CrawlRequest], found: Found, allowed: list[int] | None = None
    ) -> list[CrawlRequest]:
        kept = self.links.robots_checked(requests, allowed)
        found.left_out(requests, kept, "robots")
        return kept

    def alias_request(self, target: str, request: CrawlRequest) -> list[CrawlRequest]:
        """Another name for this page (redirect target, canonical URL), at the same depth."""
        url = self.normalise(target)
        return [] if url is None else self._alias(url, request)

    def _alias(self, url: str, request: CrawlRequest) -> list[CrawlRequest]:
        """``alias_request`` of a normalised URL."""
        if self.links.reject_reason(url) is not None:
            return []
        return [self.links.request(url, request.depth, request.url)]

    async def _sitemap(
        self, request: CrawlRequest, result: FetchResult, page: PageRecord, found: Found
    ) -> list[CrawlRequest]:
        """What a fetched sitemap adds to the crawl, read off the loop (analysis.py)."""
        listed = await self.analysis.analyse_sitemap(request, result)
        page.links_count = listed.listed
        self.counters.update(listed.counters)
        self.links.rejected.update(listed.rejected)
        found.skips += [(url, reason, None, SITEMAP) for url, reason, _anchor in listed.skipped]
        return self._robots_checked(self._found(listed.requests, SITEMAP, found), found)

    def _not_blocked(self, requests: list[CrawlRequest], found: Found) -> list[CrawlRequest]:
        blocks = self.blocklist.blocks
        kept = [request for request in requests if not blocks(request.host)]
        if len(kept) < len(requests):
            self.links.rejected["blocklist"] += len(requests) - len(kept)
            found.left_out(requests, kept, "blocklist")
        return kept
