"""One leased URL through the crawl: robots.txt, the fetch, then retried, dead or
recorded, its outcome in the batch.

A task holds its URL's host from lease to the end of its response, so one
request is in flight per host, and a request slot only while it talks to the
host (engine_dispatch.py). A host whose next request is not due soon gets the
URL back (``hand_back``): the frontier waits, not a request slot. The policy is
the stages': robots verdicts from robotsgate.py, retries from retry.py, what an
answer means from outcome.py and discovery.py. A URL's result (state, attempt
rows, page, links found) joins the batch in one step, after its last await, so
a commit swapping the batch can never split it (commits.py). A bug costs the
URL it hit, recorded as an internal error, never the crawl.

``UrlFlow`` is a part of ``Crawler`` (engine.py), which builds the state
declared below; its methods are the crawler's own, not a layer in front of them.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

from trawler.outcome import NOT_HTML, REDIRECT_ELSEWHERE
from trawler.provenance import via_of
from trawler.records import CrawlRequest, FetchResult
from trawler.recrawl_flow import revisit_headers
from trawler.recrawl_lanes import REVISIT
from trawler.renderflow import render_bytes
from trawler.robotsgate import Verdict
from trawler.store.base import DEAD, DONE, RETRY, SKIPPED, UrlOutcome
from trawler.throttle import PAGE_OVERHEAD_BYTES, RequestSlot

if TYPE_CHECKING:
    from trawler.commits import Commits
    from trawler.config import CrawlConfig
    from trawler.discovery import Discovery
    from trawler.fetch import Fetcher
    from trawler.frontier.base import Frontier
    from trawler.linkfilter import LinkFilter
    from trawler.recrawl_flow import RevisitFlow
    from trawler.renderflow import Rendering
    from trawler.retry import RetryPolicy
    from trawler.robotsgate import RobotsGate
    from trawler.scope import Scope
    from trawler.services import Services
    from trawler.tdmgate import TdmGate
    from trawler.throttle import ByteBudget
    from trawler.urls import Normaliser

log = logging.getLogger("trawler")

# A host whose next request is further off than this once its URL is leased (it just
# answered its robots.txt) goes back to the frontier rather than keep a request slot.
HAND_BACK_AFTER_S = 0.05


class UrlFlow:
    """The steps of one leased URL, from its robots.txt to its outcome (module doc)."""

    # Built by Crawler (engine.py); ``frontier`` once run() has opened it.
    config: CrawlConfig
    services: Services
    frontier: Frontier
    fetcher: Fetcher
    robots: RobotsGate
    tdm: TdmGate
    rendering: Rendering | None
    revisits: RevisitFlow | None
    discovery: Discovery
    commits: Commits
    retry: RetryPolicy
    normalise: Normaliser
    scope: Scope
    links: LinkFilter
    analysing: ByteBudget  # the process's analysis queue, over all its jobs
    paused: bool
    errors: int
    not_html: int
    _counters: Counter[str]
    _rng: random.Random  # retry jitter

    async def _process(self, request: CrawlRequest, slot: RequestSlot, task: RequestSlot) -> None:
        host, holds_host = request.host, True
        try:
            if (self.paused or self.services.blocklist.active) and await self._held_back(request):
                return
            verdict = await self.robots.verdict(request.url, host, self.frontier)
            if verdict is Verdict.LATER:
                await self.frontier.hand_back(request, self.robots.retry_in(request.url))
                return
            if verdict is Verdict.FAILED:  # the origin cannot be fetched (dns, private)
                slot.release()
                await self._record(request, self.robots.failure(request.url))
                return
            if verdict is not Verdict.ALLOW:
                disallowed = verdict is Verdict.DISALLOW
                self._skip(request, "robots" if disallowed else "robots_unavailable")
                return
            if self.config.tdmrep and not self.tdm.known(request.url):
                if await self._handed_back(request, host):
                    return
                await self.tdm.load(request.url, host, self.frontier)  # once per origin
            if await self._handed_back(request, host):
                return
            await self.frontier.wait_host_ready(host)
            if (self.paused or self.services.blocklist.active) and await self._held_back(request):
                return
            result = await self.fetcher.fetch(
                request.url,
                hop_check=partial(self._hop_check, host, request.kind == REVISIT),
                on_sent=partial(self.frontier.record_sent, host),
                extra_headers=revisit_headers(request),
            )
            if self.rendering is not None and self.rendering.wants(request, result):
                await self.rendering.render(request, result, self.frontier)  # host still held
            slot.release()
            self.frontier.record_response(host, result.status, result.error, result.retry_after_s)
            holds_host = False
            await self._finish_host(host)  # its next URL may be leased now
            await self._after_fetch(request, result, task)
        except Exception as exc:  # a bug must cost one URL, never the crawl
            log.exception("internal error on %s", request.url)
            slot.release()
            await self._record(request, _internal_error(request.url, exc))
        finally:
            slot.release()
            if holds_host:
                await self.frontier.finish_host(host)

    async def _handed_back(self, request: CrawlRequest, host: str) -> bool:
        """The URL back to the frontier when its host's next request is not due soon:
        the frontier waits, not a request slot."""
        if (wait_s := self.frontier.host_wait_s(host)) > HAND_BACK_AFTER_S:
            await self.frontier.hand_back(request, wait_s)
            return True
        return False

    async def _finish_host(self, host: str) -> None:
        """Release the host once its response is in. Failing to (the store going away
        while stopping) must not cost the page fetched: a held host's lease expires."""
        try:
            await self.frontier.finish_host(host)
        except Exception as exc:
            log.warning("host %s not released: %s", host, exc)

    async def _held_back(self, request: CrawlRequest) -> bool:
        """No request for this URL now: paused since it was leased (it goes back to the
        queue), or its host blocked (it is skipped, recorded with the reason)."""
        if self.paused:
            await self.frontier.hand_back(request)
            return True
        blocklist = self.services.blocklist
        if blocklist.active and blocklist.blocks(request.host):
            self._skip(request, "blocklist")
            return True
        return False

    def _skip(self, request: CrawlRequest, reason: str) -> None:
        """Not fetched, for ``reason``: a URL is done as skipped, a revisit asked later."""
        if request.kind == REVISIT and self.revisits is not None:
            self.commits.batch.add_revisit(self.revisits.skipped(request, reason))
        else:
            detail = self.discovery.skip_detail(reason, request.url)
            row = (request.url, request.parent_url, via_of(request), None, reason, detail)
            self.commits.batch.add(UrlOutcome(request, SKIPPED, reason=reason, provenance=[row]))

    async def _revisited(self, request: CrawlRequest, result: FetchResult) -> None:
        """A revisit's answer (or failure): judged and committed as a visit, never
        retried at once (a 429/503 has slowed its host; the page comes due again)."""
        assert self.revisits is not None
        outcome = await self.revisits.finish(request, result, self.frontier)  # type: ignore[arg-type]
        await self.commits.room()
        self.commits.batch.add_revisit(outcome)

    async def _after_fetch(
        self, request: CrawlRequest, result: FetchResult, task: RequestSlot
    ) -> None:
        """Retry, dead-letter or record the URL (its answer has shaped the host's pace)."""
        if request.kind == REVISIT:
            await self._revisited(request, result)
            return
        decision = self.retry.decide(
            result.error, result.status, request.attempts + 1, self._rng, result.retry_after_s
        )
        attempt = _attempt_row(request, result, decision.action)
        if decision.action == RETRY:  # the attempt is committed now, the URL when it ends
            self.commits.batch.add(UrlOutcome(request, RETRY, [attempt]))
            request.attempts += 1
            self._counters[f"retried.{decision.reason}"] += 1
            await self.frontier.retry_later(request, decision.delay_s)
            return
        state = DEAD if decision.action == DEAD else DONE
        await self._record(request, result, state, [attempt], task)

    async def _record(
        self, request: CrawlRequest, result: FetchResult, state: str = DONE,
        attempts: list[tuple] | None = None, task: RequestSlot | None = None,
    ) -> None:  # fmt: skip
        """Analyse the page, then add the URL's whole outcome to the batch at once.
        From the analysis on, the page holds its bytes of the analysis queue, not
        its ``task`` slot."""
        if request.kind == REVISIT:
            await self._revisited(request, result)
            return
        outcome = UrlOutcome(request, state, attempts or [], result)
        size = PAGE_OVERHEAD_BYTES + len(result.body) + len(result.raw_body) + render_bytes(result)
        await self.analysing.take(size)
        if task is not None:
            task.release()
        try:
            try:
                await self._analyse(outcome)
            except Exception as exc:  # a bug must cost one URL, never the crawl
                log.exception("internal error on %s", request.url)
                outcome.result = _internal_error(request.url, exc)
                await self._analyse(outcome)
            await self.commits.room()
            self.commits.add(outcome, size)  # no await since the analysis: one commit gets it all
        finally:
            self.analysing.give(size)

    async def _analyse(self, unit: UrlOutcome) -> None:
        """Fill in the outcome's page and the new URLs found from it (discovery.py)."""
        page = await self.discovery.analyse(unit, self.frontier)
        self.tdm.annotate(page)  # the origin's reuse reservations (tdmgate.py)
        if page.error == NOT_HTML:
            self.not_html += 1
        elif page.error is not None:
            self.errors += 1

    async def _hop_check(self, held_host: str, revisit: bool, target: str) -> str | None:
        """Vet a redirect hop; same-host, unseen targets are followed inline, except
        from a revisit: a page that moved is recorded as redirected, and its target
        is crawled as a URL of its own (discovery.py)."""
        url = self.normalise(target)
        if url is None:
            return "bad_redirect"
        if not self.scope.allows(url):
            return "out_of_scope"
        hop = self.links.request(url, 0, None)
        if self.services.blocklist.active and self.services.blocklist.blocks(hop.host):
            return "blocklist"
        if revisit or hop.host != held_host or not await self.frontier.filter_new([hop]):
            return REDIRECT_ELSEWHERE  # another host's slot, or fetched on its own
        verdict = await self.robots.verdict(url, held_host, self.frontier)
        if verdict is not Verdict.ALLOW:
            return "robots" if verdict is Verdict.DISALLOW else "robots_unavailable"
        await self.frontier.wait_host_ready(held_host)
        return None


def _attempt_row(request: CrawlRequest, result: FetchResult, decision: str) -> tuple:
    return (request.url, request.attempts + 1, result.started_at, round(result.duration_s, 6),
            result.status, result.error, decision)  # fmt: skip


def _internal_error(url: str, exc: Exception) -> FetchResult:
    detail = f"{type(exc).__name__}: {exc}"
    return FetchResult(url, url, error="internal", error_detail=" ".join(detail.split()))
