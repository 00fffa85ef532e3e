"""The robots.txt gate of the crawl loop: one robots.txt per origin, fetched under
the host's politeness slot before any other request to it, cached, and asked
about every URL (RFC 9309; what each fetch outcome means is robotscache.py).
Fetches are also kept by the frontier: shared with a job's other workers, and
across a restart; answers also with other jobs of the same fetch profile."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from enum import Enum
from functools import partial

from trawler.fetch import Fetcher
from trawler.frontier.base import Frontier
from trawler.records import FetchResult, RobotsFetch
from trawler.robotscache import (
    CACHE_TTL_S,
    ProcessRobots,
    RobotsEntry,
    entry_from_fetch,
    entry_from_kept,
)
from trawler.tdmrep import AiGroups
from trawler.urls import origin

# Link verdicts remembered (RobotsGate.allows), ~14 MB at most; past it they start over.
# The links a crawl asks about again are its hosts' recent URLs: ~98,000 on the 2,000-host
# benchmark, where 32,768 were cleared 18 times a crawl and answered 24 % of the asks
# (0.8 M asks; a miss, origin() and the match, ~3 µs): bench/RESULTS.md, session 30.
_LINK_VERDICTS_MAX = 1 << 17


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
        robots_token: str,
        retry_waits_s: tuple[float, ...],
        counters: Counter[str],
        on_first_fetch: Callable[[str, RobotsEntry], Awaitable[None]],
        on_download: Callable[[FetchResult, str], None],
        shared: ProcessRobots | None = None,
    ) -> None:
        """``shared``: the fetches of the process's other jobs (Services)."""
        self.fetcher = fetcher
        self.shared = shared
        # False: the process's copies are not read (still offered): a revisit pass asked
        # for now wants the rules as they are now, not as another job found them.
        self.read_shared = True
        # Not part of the fetch profile: robots.txt bodies are kept and shared, and each
        # job reads them with its own token (a verdict is never shared).
        self.robots_token = robots_token
        self.retry_waits_s = retry_waits_s
        self.counters = counters
        self.on_first_fetch = on_first_fetch  # e.g. queue the origin's sitemaps
        # Each download (not each use of a kept one) is archived, like any response.
        self.on_download = on_download
        self._entries: dict[str, RobotsEntry] = {}
        # url -> allowed, by the entries held now: a page's links are mostly its host's
        # other pages, asked about by every page of the host (origin() and the match
        # cost ~1.7 µs a link). Emptied whenever an entry is replaced.
        self._link_verdicts: dict[str, bool] = {}
        # Counts the entries replaced: a link's verdict may have changed (knownlinks.py).
        self.generation = 0

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
        # The link filter's verdict, when it asked about this URL under this entry (a
        # replaced entry empties them): one robots match a URL, not two. Not stored here:
        # the URLs fetched would crowd out the links still to ask about.
        allowed = self._link_verdicts.get(url)
        if allowed is None:
            allowed = entry.rules.allowed(url)
        return Verdict.ALLOW if allowed else Verdict.DISALLOW

    def rule_of(self, url: str) -> str | None:
        """The rule of the held robots.txt that decides ``url``, with its line, in words
        (provenance.py); None when none is held or none matches."""
        site = origin(url)
        entry = self._entries.get(site)
        if entry is None:
            return None
        verdict = entry.rules.explain(url)
        if verdict.rule is None:
            return None
        if verdict.line is None:  # not written in a file: robots.txt unreachable
            return f"{verdict.rule} (robots.txt unreachable: {entry.fatal_error or 'no answer'})"
        return f'"{verdict.rule}" at line {verdict.line} of {site}/robots.txt ({verdict.group})'

    async def _fetch(
        self, site: str, host: str, frontier: Frontier, previous: RobotsEntry | None
    ) -> RobotsEntry:
        """From the frontier's robots.txt cache (fetched by another worker, or before a
        restart) while it is fresh, else over the network."""
        profile = self.fetcher.profile
        kept = await frontier.shared_robots(site, profile)
        if kept is None and self.shared is not None and self.read_shared:
            kept = self.shared.get(site, profile, time.monotonic())
        if kept is not None:
            entry = entry_from_kept(
                kept, self.robots_token, time.monotonic(), time.time(), self.retry_waits_s
            )
            if not entry.expired(time.monotonic()):
                self.counters["robots.shared"] += 1
                return self._keep(site, host, frontier, entry)
            if previous is None or previous.fetched_at < entry.fetched_at:
                previous = entry  # the newer one: its failures count on
        result = await self._download(site, host, frontier)
        entry = entry_from_fetch(
            result, self.robots_token, time.monotonic(), previous, self.retry_waits_s
        )
        kept = RobotsFetch(result.status, result.error, result.body, time.time(), entry.failures)
        # An answer is the server's and is shared by every job that asks alike (same
        # profile); an error also depends on the job's own timeouts and on the moment.
        # An unavailable one stays in the job too: its count of failures drives the
        # job's own retry waits, and is kept past its retry time (like an answer), so
        # the job's next fetcher, maybe another worker, goes on counting and gives up
        # in time. Kept only until the retry was due, each worker started the count
        # again and fetched robots.txt more often than --robots-retry-wait allows.
        job_only = result.error is not None or entry.unavailable
        await frontier.share_robots(site, profile, kept, CACHE_TTL_S, job_only=job_only)
        if self.shared is not None and not job_only:
            self.shared.put(site, profile, kept, time.monotonic() + CACHE_TTL_S)
        return self._keep(site, host, frontier, entry)

    def _keep(self, site: str, host: str, frontier: Frontier, entry: RobotsEntry) -> RobotsEntry:
        if site in self._entries:  # verdicts remembered under the old one may not hold
            self._link_verdicts.clear()  # (none are for an origin without one)
            self.generation += 1
        self._entries[site] = entry
        frontier.set_crawl_delay(host, entry.rules.crawl_delay)
        return entry

    async def _download(self, site: str, host: str, frontier: Frontier) -> FetchResult:
        await frontier.wait_host_ready(host)
        result = await self.fetcher.fetch_robots(
            site + "/robots.txt", on_sent=partial(frontier.record_sent, host)
        )
        frontier.record_response(host, result.status, result.error, result.retry_after_s)
        self.counters["robots.fetched"] += 1
        self.on_download(result, host)
        return result

    def ai_groups(self, url: str) -> AiGroups | None:
        """The AI crawlers' groups of ``url``'s origin's robots.txt (None: no file)."""
        return self.site_ai_groups(origin(url))

    def site_ai_groups(self, site: str) -> AiGroups | None:
        """``ai_groups`` of an origin (``urls.origin``) the caller has at hand."""
        entry = self._entries.get(site)
        return None if entry is None else entry.ai_groups

    def failure(self, url: str) -> FetchResult:
        """The recorded result for a URL whose origin cannot be fetched at all."""
        error = self._entries[origin(url)].fatal_error
        return FetchResult(url, url, error=error, error_detail=f"robots.txt fetch failed: {error}")

    def retry_in(self, url: str) -> float:
        entry = self._entries[origin(url)]
        return max(entry.retry_at - time.monotonic(), 0.0)

    def allows(self, url: str) -> bool | None:
        """Cached verdict for the link filter; None when robots.txt is not known yet."""
        verdicts = self._link_verdicts
        allowed = verdicts.get(url)
        if allowed is not None:
            return allowed
        entry = self._entries.get(origin(url))
        if entry is None or entry.unavailable:
            return None
        allowed = entry.rules.allowed(url)
        if len(verdicts) >= _LINK_VERDICTS_MAX:
            verdicts.clear()
        verdicts[url] = allowed
        return allowed
