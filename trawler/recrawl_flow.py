"""Revisits in the crawl engine (issue 15): feeding due pages to the frontier and
turning a revisit's answer into a ``RevisitOutcome`` for the commit.

The engine fetches a revisit like any URL (engine_url.py): leased from the frontier under
the host's slot, robots.txt checked through the crawl's gate, the private-address
guard, Crawl-delay, 429/503 back-off and redirects of the crawl's fetch path. Only
three things differ, and they are here: the request carries the page's validators
(``revisit_headers``), the answer is judged against the stored version
(recrawl_visit.py) instead of being stored as a page, and a page not fetched now
(robots.txt, blocklist) is asked again later instead of being marked skipped.
Links of a changed page and a redirect's target go through discovery.py like any
page's, at the page's depth + 1 (the target at the page's depth).

Feeding: continuous mode reads the due rows every ``POLL_S``; one pass
(``trawler recrawl``) reads every row once, in table order. Either way at most
``MAX_PENDING`` revisits are queued or leased at once, so memory does not grow with
the pages stored. The distributed backend feeds Redis's lanes its own way
(``feed_revisits``: store/dist_revisits.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from trawler import tdmrefresh
from trawler.config import CrawlConfig
from trawler.discovery import Discovery
from trawler.frontier.base import Revisitable
from trawler.records import CrawlRequest, FetchResult
from trawler.recrawl import RevisitWindow
from trawler.recrawl_lanes import REVISIT, revisit_request, state_of
from trawler.recrawl_visit import CHANGED, REDIRECTED, RevisitOutcome, conditional_headers, judge
from trawler.slowstop import end_task
from trawler.store.base import DONE, RevisitBackend, UrlOutcome
from trawler.tdmgate import TdmGate

log = logging.getLogger("trawler")

POLL_S = 0.25  # how often continuous mode looks for pages come due
MAX_PENDING = 10_000  # revisits queued or leased at once


@dataclass(slots=True)
class RevisitOptions:
    window: RevisitWindow = field(default_factory=RevisitWindow)
    continuous: bool = False  # keep revisiting pages as they come due, until stopped
    discovery: bool = True  # new URLs are crawled too (crawl --recrawl); False: revisits only
    reread_robots: bool = False  # robots.txt kept by an earlier run is fetched again first


@dataclass(slots=True)
class RecrawlTotals:
    """What a run did, by verdict, and the body bytes it received."""

    visits: dict[str, int] = field(default_factory=dict)
    body_bytes: int = 0


def continuous_options(config: CrawlConfig, backend: object) -> RevisitOptions | None:
    """A continuous job's revisits (its stored ``recrawl`` and window), new URLs crawled
    beside them; None for other jobs and for backends without versions."""
    if not config.recrawl or not hasattr(backend, "open_revisits"):
        return None
    window = RevisitWindow(config.revisit_min_s, config.revisit_max_s, config.revisit_policy)
    return RevisitOptions(window, continuous=True, discovery=True)


def revisit_headers(request: CrawlRequest) -> tuple[tuple[str, str], ...]:
    """The validators a revisit sends (none for a new URL)."""
    return conditional_headers(state_of(request)) if request.kind == REVISIT else ()


class RevisitFlow:
    def __init__(self, options: RevisitOptions, backend: RevisitBackend, discovery: Discovery,
                 counters: Counter[str], tdm: TdmGate | None = None) -> None:  # fmt: skip
        """``counters``: the crawl's (kept with each commit): ``revisit.<verdict>``;
        ``tdm``: the crawl's reuse-reservation gate, to refresh a page's (tdmrefresh.py)."""
        self.options = options
        self.tdm = tdm
        self.backend = backend
        self.discovery = discovery
        self.counters = counters
        self.totals = RecrawlTotals()
        self._feeder: asyncio.Task[None] | None = None

    async def start(self, frontier: Revisitable) -> None:
        """Seed the pages' revisit state and start feeding the frontier."""
        await self.backend.open_revisits(self.options.window)
        if self.options.reread_robots:
            frontier.drop_kept_robots()
        frontier.set_revisit_mode(True, self.options.discovery)
        self._feeder = asyncio.create_task(self._feed(frontier))

    async def stop(self) -> None:
        if self._feeder is not None:
            await end_task(self._feeder)  # a single cancel can be swallowed (slowstop.py)

    async def _feed(self, frontier: Revisitable) -> None:
        # The distributed backend feeds Redis's lanes itself (store/dist_revisits.py):
        # its due pages are claimed in PostgreSQL by one worker for all of them.
        feed_revisits = getattr(self.backend, "feed_revisits", None)
        try:
            if feed_revisits is not None:
                await feed_revisits(frontier)
            elif self.options.continuous:
                await self._feed_due(frontier)
            else:
                await self._feed_pass(frontier)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database failing: stop revisiting, not the crawl
            log.error("cannot read the pages due for a revisit: %s", exc)
            frontier.set_revisit_mode(False, self.options.discovery)

    async def _feed_due(self, frontier: Revisitable) -> None:
        while True:
            pending = frontier.revisits_pending
            if pending < MAX_PENDING:
                poll = frontier.revisit_poll_started()
                # Pending pages are still due in the table: ask for enough beyond them.
                due = await self.backend.due_revisits(time.time(), MAX_PENDING)
                frontier.add_revisits([revisit_request(s, d) for s, d in due], poll)
            await asyncio.sleep(POLL_S)

    async def _feed_pass(self, frontier: Revisitable) -> None:
        while True:
            room = MAX_PENDING - frontier.revisits_pending
            if room <= 0:
                await asyncio.sleep(POLL_S)
                continue
            rows = await self.backend.pass_revisits(room)
            if not rows:
                break
            frontier.add_revisits([revisit_request(s, d) for s, d in rows], None)
        frontier.set_revisit_mode(False, self.options.discovery)  # done once they are

    async def finish(
        self, request: CrawlRequest, result: FetchResult, frontier: Revisitable
    ) -> RevisitOutcome:
        """The revisit's verdict, and the URLs a changed page or a redirect leads to."""
        state = state_of(request)
        judgement = judge(state, result)
        outcome = RevisitOutcome(request, state, result, judgement)
        page = None
        if judgement.verdict in (CHANGED, REDIRECTED):
            unit = UrlOutcome(request, DONE, [], result)
            page = await self.discovery.analyse(unit, frontier)
            outcome.discovered = unit.discovered
        if self.tdm is not None:
            tdmrefresh.refresh(outcome, page, self.tdm)
        self._count(judgement.verdict)
        self.totals.body_bytes += len(result.raw_body)
        return outcome

    def skipped(self, request: CrawlRequest, reason: str) -> RevisitOutcome:
        """Not fetched now: disallowed (or blocked) pages are asked again at
        --revisit-max, pages whose robots.txt is unavailable at --revisit-min."""
        window = self.options.window
        wait_s = window.min_s if reason == "robots_unavailable" else window.max_s
        self._count(reason)
        return RevisitOutcome(request, state_of(request), defer_to=time.time() + wait_s,
                              reason=reason)  # fmt: skip

    def _count(self, verdict: str) -> None:
        self.totals.visits[verdict] = self.totals.visits.get(verdict, 0) + 1
        self.counters[f"revisit.{verdict}"] += 1
