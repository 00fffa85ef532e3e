"""The crawl loop's reuse-reservation stage: each origin's ``/.well-known/tdmrep.json``
fetched once, under the host's politeness slot and the fetcher's private-network
guard, as robots.txt is (robotsgate.py), then applied to every page of the origin
with the host's AI-crawler robots.txt groups (tdmrep.py says what they mean).

Fetches are kept where robots.txt fetches are (the frontier: the job's other workers
and the next run; the process: its other jobs), under a fetch profile of their own,
so an origin's file is asked for once per job however many workers crawl it. A 404
or any other non-2xx answer, a network error and a malformed file all mean "no
file"; a malformed one is logged once per origin.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from functools import partial

from trawler.fetch import Fetcher
from trawler.frontier.base import Frontier
from trawler.records import PageRecord, RobotsFetch
from trawler.robotscache import CACHE_TTL_S, ProcessRobots
from trawler.robotsgate import RobotsGate
from trawler.tdmrep import (
    KEPT_PROFILE_SUFFIX,
    TDMREP_PATH,
    AiGroups,
    Reservation,
    TdmRepError,
    TdmRule,
    file_reservation,
    header_reservation,
    parse_tdmrep,
)
from trawler.urls import origin

log = logging.getLogger("trawler")
_NO_FILE: tuple[TdmRule, ...] = ()


class TdmGate:
    def __init__(
        self,
        fetcher: Fetcher,
        robots: RobotsGate,
        counters: Counter[str],
        shared: ProcessRobots | None = None,
    ) -> None:
        self.fetcher = fetcher
        self.robots = robots
        self.counters = counters
        self.shared = shared
        self._rules: dict[str, tuple[TdmRule, ...]] = {}  # origin -> its rules (() no file)

    def known(self, url: str) -> bool:
        return origin(url) in self._rules

    async def load(self, url: str, host: str, frontier: Frontier) -> None:
        """Read ``url``'s origin's tdmrep.json, kept or over the network; the caller
        holds the host and has its robots.txt verdict for ``url``."""
        site = origin(url)
        profile = self.fetcher.profile + KEPT_PROFILE_SUFFIX
        kept = await frontier.shared_robots(site, profile)
        if kept is None and self.shared is not None:
            kept = self.shared.get(site, profile, time.monotonic())
        if kept is None:
            kept = await self._download(site, host, frontier)
            job_only = kept.error is not None  # an answer is the server's, an error ours
            await frontier.share_robots(site, profile, kept, CACHE_TTL_S, job_only=job_only)
            if self.shared is not None and not job_only:
                self.shared.put(site, profile, kept, time.monotonic() + CACHE_TTL_S)
        self._rules[site] = self._read(site, kept)

    async def _download(self, site: str, host: str, frontier: Frontier) -> RobotsFetch:
        url = site + TDMREP_PATH
        if self.robots.allows(url) is False:  # a site may keep crawlers off it, too
            self.counters["tdmrep.disallowed"] += 1
            return RobotsFetch(None, "robots", b"", time.time())
        await frontier.wait_host_ready(host)
        # robots.txt's limits: five redirects, the first 512 KiB (a cut file is malformed)
        result = await self.fetcher.fetch_robots(url, on_sent=partial(frontier.record_sent, host))
        frontier.record_response(host, result.status, result.error, result.retry_after_s)
        self.counters["tdmrep.fetched"] += 1
        return RobotsFetch(result.status, result.error, result.body, time.time())

    def _read(self, site: str, kept: RobotsFetch) -> tuple[TdmRule, ...]:
        if kept.error is not None or kept.status is None or not 200 <= kept.status < 300:
            return _NO_FILE
        try:
            rules = parse_tdmrep(kept.body)
        except TdmRepError as exc:
            log.warning("%s%s is malformed, taken as no file: %s", site, TDMREP_PATH, exc)
            self.counters["tdmrep.malformed"] += 1
            return _NO_FILE
        self.counters["tdmrep.files"] += 1
        return rules

    def restated(
        self, url: str, headers: list[tuple[str, str]]
    ) -> tuple[Reservation, AiGroups | None]:
        """What a revisited page whose body was not read again states now: its
        headers, else its origin's file's rule; and its host's AI crawlers' groups."""
        stated = header_reservation(headers)
        rules = self._rules.get(origin(url))
        if stated.source is None and rules:
            stated = file_reservation(rules, url)
        return stated, self.robots.ai_groups(url)

    def annotate(self, page: PageRecord) -> None:
        """The origin's statements on a page that got an answer: the tdmrep.json rule
        for its path unless the page stated its own, and the AI crawlers' groups."""
        if page.status is None:
            return
        site, url = origin(page.url), page.url
        if page.final_url != url and origin(page.final_url) == site:
            url = page.final_url  # a same-origin redirect: the rule of the path answered
        if page.tdm_source is None:
            rules = self._rules.get(site)
            if rules:
                stated = file_reservation(rules, url)
                page.tdm_reservation, page.tdm_policy, page.tdm_source = (
                    stated.reserved,
                    stated.policy,
                    stated.source,
                )
        groups = self.robots.site_ai_groups(site)  # url is of that origin (above)
        if groups is not None:
            page.ai_robots_groups = ",".join(groups.named)
            page.ai_robots_disallowed = ",".join(groups.disallowed)
