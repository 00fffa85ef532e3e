"""The crawl loop: wires frontier, fetcher, parser, link filter and store.

It decides no policy of its own (STYLE.md rule 1): robots verdicts come from
robots.py/robotscache.py, scope and traps from urls.py via linkfilter.py,
spacing from politeness.py, what a response means for the page from
outcome.py. It only orders the steps and owns the commit cadence.

One task per leased URL, at most ``concurrency`` at once. A task holds its
host's politeness slot from lease to finish, so one request is in flight per
host, robots.txt and same-host redirect hops included. Results collect in a
batch that a commit task makes durable every ``COMMIT_INTERVAL_S``; only
then are discovered URLs scheduled and leases acknowledged. A URL's result
(state, attempt rows, page, links found) joins the batch in one step, after
its last await, so a commit swapping the batch can never split it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from trawler.analysis import AnalysisPool, default_processes
from trawler.config import CrawlConfig
from trawler.fetch import Fetcher
from trawler.linkfilter import LinkFilter
from trawler.outcome import NOT_HTML, REDIRECT_ELSEWHERE, robots_record
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.retry import RetryPolicy
from trawler.robotscache import RobotsEntry
from trawler.robotsgate import RobotsGate, Verdict
from trawler.sitemapflow import sitemaps_of_origin
from trawler.store.base import DEAD, DONE, RETRY, SKIPPED, Backend, CommitBatch, UrlOutcome
from trawler.urls import Normaliser, Scope, TrapRules, host_key

log = logging.getLogger("trawler")

COMMIT_INTERVAL_S = 0.25
COMMIT_MAX_ITEMS = 2000  # commit early when a batch grows past this
# While a commit runs, the next batch grows up to this many rows, then the tasks that
# would add to it wait for the commit: discovery never outruns the commit.
BATCH_LIMIT_ITEMS = 20 * COMMIT_MAX_ITEMS
SHUTDOWN_GRACE_S = 5.0


@dataclass(slots=True)
class Progress:
    pages: int
    pages_per_s: float
    queued: int
    active_hosts: int
    errors: int
    elapsed_s: float
    not_html: int = 0  # successful downloads that are not HTML: not errors


class Crawler:
    def __init__(
        self,
        config: CrawlConfig,
        backend: Backend,
        on_progress: Callable[[Progress], None] | None = None,
        seeds: Iterable[Sequence[str]] = (),
    ) -> None:
        """``seeds``: chunks of normalised seed URLs to add (seeds.py), none on a resume."""
        self.config = config
        self.backend = backend
        self.on_progress = on_progress
        self.seeds = seeds
        self.normalise = Normaliser(config.tracking_params)
        # Widened by the job's kept seed hosts and by new seeds in run().
        self.scope = Scope.from_hosts(config.scope, (), config.include, config.exclude)
        self._counters: Counter[str] = Counter()
        self.fetcher = Fetcher(config)
        waits = tuple(config.robots_retry_waits_s)
        self.robots = RobotsGate(
            self.fetcher, config.robots_token, waits, self._counters, self._first_robots,
            self._archive_robots,
        )  # fmt: skip
        self.links = LinkFilter(
            self.normalise, self.scope, TrapRules(), config.max_depth, self.robots.allows,
            max_per_host=config.max_pages_per_host,
        )  # fmt: skip
        self.retry = RetryPolicy(max_attempts=config.max_attempts)
        self._rng = random.Random()  # retry jitter
        processes = config.parse_processes
        if processes is None:
            processes = default_processes()
        self.analysis = AnalysisPool(config, processes)
        self._seed_hosts: set[str] = set()
        self._batch = CommitBatch()
        self._tasks: set[asyncio.Task[None]] = set()
        self._commit_wanted = asyncio.Event()
        self.batch_limit = BATCH_LIMIT_ITEMS
        self._batch_taken = asyncio.Event()  # set (and replaced) when a commit takes the batch
        self._stopping = False
        self._unpaused = asyncio.Event()  # cleared while the job is paused
        self._unpaused.set()
        self._fatal: BaseException | None = None
        self.pages_stored = 0  # committed pages, including those of earlier runs
        self.errors = 0
        self.not_html = 0  # successful non-HTML downloads, counted apart from errors
        self.exhausted = False

    # -- public ------------------------------------------------------------------
    async def run(self, stored_before: int) -> bool:
        """Crawl until done, stopped or the page budget is spent; True when complete."""
        self.pages_stored = stored_before
        self.frontier = await self.backend.open(self.config)
        if self.config.max_pages_per_host is not None:
            self.links.admitted.update(await self.backend.host_url_counts())
        self._widen_scope(await self.backend.scope_hosts())
        await self._add_seeds()
        await self._commit()
        self.analysis.start(sorted(self._seed_hosts))  # the scope is complete now
        await self.fetcher.start()
        committer = asyncio.create_task(self._commit_loop())
        reporter = asyncio.create_task(self._report_loop()) if self.on_progress else None
        try:
            await self._dispatch()
            await self._drain()
        finally:
            self._stopping = True
            self._commit_wanted.set()
            await committer
            if reporter:
                reporter.cancel()
            await self.fetcher.close()
            self.analysis.close()
            await self._close_backend()
        if self._fatal is not None:
            raise self._fatal
        return self.exhausted or self._budget_spent()

    async def _close_backend(self) -> None:
        try:
            await self.backend.close()
        except Exception as exc:  # e.g. disk full while closing the WARC file
            log.error("cannot close the store cleanly: %s", exc)
            self._fatal = self._fatal or exc

    def stop(self) -> None:
        """Stop taking new URLs; in-flight ones finish or are handed back."""
        if not self._stopping:
            log.info("stopping: finishing requests in flight")
            self._stopping = True
            self._unpaused.set()  # a paused dispatch wakes up to leave
            self.frontier.close()

    def pause(self) -> None:
        """Start no new request; those in flight finish and are committed."""
        if self._unpaused.is_set() and not self._stopping:
            log.info("paused: finishing requests in flight")
            self._unpaused.clear()

    def resume(self) -> None:
        if not self._unpaused.is_set():
            log.info("resumed")
            self._unpaused.set()

    @property
    def paused(self) -> bool:
        return not self._unpaused.is_set()

    # -- dispatch ------------------------------------------------------------------
    async def _dispatch(self) -> None:
        limit = asyncio.Semaphore(self.config.concurrency)
        while not self._stopping:
            await self._unpaused.wait()
            await limit.acquire()
            if self.config.max_pages is not None and not await self._within_budget():
                limit.release()
                return
            request = await self.frontier.next()
            if request is None:
                limit.release()
                self.exhausted = not self._stopping
                return
            if self.paused:  # paused while it waited for its host: not started
                await self.frontier.hand_back(request)
                await self.frontier.finish_host(request.host)
                limit.release()
                continue
            task = asyncio.create_task(self._process(request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda _t: limit.release())

    async def _within_budget(self) -> bool:
        """Wait while in-flight pages could still use up --max-pages."""
        max_pages = self.config.max_pages
        while max_pages is not None and not self._stopping:
            if self._budget_spent():
                return False
            if self._pages_counted() + len(self._tasks) < max_pages:
                return True
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
        return not self._stopping

    def _pages_counted(self) -> int:
        return self.pages_stored + self._batch.pages

    def _budget_spent(self) -> bool:
        max_pages = self.config.max_pages
        return max_pages is not None and self._pages_counted() >= max_pages

    async def _drain(self) -> None:
        """Let in-flight requests finish (bounded when stopping), then cancel the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(
            set(self._tasks), timeout=SHUTDOWN_GRACE_S if self._stopping else None
        )
        for task in pending:  # their URLs stay queued: fetched again on resume
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    # -- one URL -------------------------------------------------------------------
    async def _process(self, request: CrawlRequest) -> None:
        host = request.host
        try:
            verdict = await self.robots.verdict(request.url, host, self.frontier)
            if verdict is Verdict.LATER:
                await self.frontier.hand_back(request, self.robots.retry_in(request.url))
                return
            if verdict is Verdict.FAILED:  # the origin cannot be fetched (dns, private)
                await self._record(request, self.robots.failure(request.url))
                return
            if verdict is not Verdict.ALLOW:
                reason = "robots" if verdict is Verdict.DISALLOW else "robots_unavailable"
                self._batch.add(UrlOutcome(request, SKIPPED, reason=reason))
                return
            await self.frontier.wait_host_ready(host)
            result = await self.fetcher.fetch(
                request.url,
                hop_check=partial(self._hop_check, host),
                on_sent=partial(self.frontier.record_sent, host),
            )
            await self._after_fetch(request, result)
        except Exception as exc:  # a bug must cost one URL, never the crawl
            log.exception("internal error on %s", request.url)
            await self._record(request, _internal_error(request.url, exc))
        finally:
            await self.frontier.finish_host(host)

    async def _after_fetch(self, request: CrawlRequest, result: FetchResult) -> None:
        """Let the answer shape the host's pace, then retry, dead-letter or record the URL."""
        self.frontier.record_response(
            request.host, result.status, result.error, result.retry_after_s
        )
        decision = self.retry.decide(
            result.error, result.status, request.attempts + 1, self._rng, result.retry_after_s
        )
        attempt = _attempt_row(request, result, decision.action)
        if decision.action == RETRY:  # the attempt is committed now, the URL when it ends
            self._batch.add(UrlOutcome(request, RETRY, [attempt]))
            request.attempts += 1
            self._counters[f"retried.{decision.reason}"] += 1
            await self.frontier.retry_later(request, decision.delay_s)
            return
        await self._record(request, result, DEAD if decision.action == DEAD else DONE, [attempt])

    async def _record(
        self, request: CrawlRequest, result: FetchResult, state: str = DONE,
        attempts: list[tuple] | None = None,
    ) -> None:  # fmt: skip
        """Analyse the page, then add the URL's whole outcome to the batch at once."""
        outcome = UrlOutcome(request, state, attempts or [], result)
        try:
            await self._analyse(outcome)
        except Exception as exc:  # a bug must cost one URL, never the crawl
            log.exception("internal error on %s", request.url)
            outcome.result = _internal_error(request.url, exc)
            await self._analyse(outcome)
        await self._room_in_batch()
        self._batch.add(outcome)  # no await since the analysis: one commit gets it all
        if len(self._batch) >= COMMIT_MAX_ITEMS:
            self._commit_wanted.set()

    async def _room_in_batch(self) -> None:
        """Back-pressure: a full batch waits for the commit (the one running, then its
        own); tasks with nothing to add go on fetching meanwhile."""
        while len(self._batch) >= self.batch_limit:
            self._commit_wanted.set()
            await self._batch_taken.wait()

    async def _analyse(self, unit: UrlOutcome) -> None:
        """Fill in the outcome's page and the new URLs found on it."""
        request, result = unit.request, unit.result
        assert result is not None
        analysis = await self.analysis.analyse(request, result)
        outcome = analysis.outcome
        self.links.rejected.update(analysis.rejected)
        discovered = self.links.robots_checked(analysis.requests)
        if request.kind == "sitemap" and outcome.page.error == NOT_HTML:
            outcome.page.error = None  # a sitemap is not HTML by nature
            discovered += await self._sitemap(request, result, outcome.page)
        if outcome.page.error == NOT_HTML:
            self.not_html += 1
        elif outcome.page.error is not None:
            self.errors += 1
        if outcome.redirect_to is not None:
            discovered += self._alias_request(outcome.redirect_to, request)
        if outcome.page.canonical is not None:
            discovered += self._canonical(outcome.page, request)
        unit.page = outcome.page
        fresh = await self.frontier.filter_new(discovered)
        unit.discovered = self.links.within_host_budget(fresh)

    async def _sitemap(
        self, request: CrawlRequest, result: FetchResult, page: PageRecord
    ) -> list[CrawlRequest]:
        """What a fetched sitemap adds to the crawl, read off the loop (analysis.py)."""
        found = await self.analysis.analyse_sitemap(request, result)
        page.links_count = found.listed
        self._counters.update(found.counters)
        self.links.rejected.update(found.rejected)
        return self.links.robots_checked(found.requests)

    def _canonical(self, page: PageRecord, request: CrawlRequest) -> list[CrawlRequest]:
        """A page whose canonical URL is another one is a duplicate of it; crawl that URL."""
        canonical = self.normalise(page.canonical or "")
        if canonical is None or canonical in (request.url, self.normalise(page.final_url)):
            return []
        page.duplicate_of = canonical
        return self._alias_request(canonical, request)

    def _alias_request(self, target: str, request: CrawlRequest) -> list[CrawlRequest]:
        """Another name for this page (redirect target, canonical URL), at the same depth."""
        url = self.normalise(target)
        if url is None or self.links.reject_reason(url) is not None:
            return []
        return [self.links.request(url, request.depth, request.url)]

    async def _hop_check(self, held_host: str, target: str) -> str | None:
        """Vet a redirect hop; same-host, unseen targets are followed inline."""
        url = self.normalise(target)
        if url is None:
            return "bad_redirect"
        if not self.scope.allows(url):
            return "out_of_scope"
        hop = self.links.request(url, 0, None)
        if hop.host != held_host or not await self.frontier.filter_new([hop]):
            return REDIRECT_ELSEWHERE  # another host's slot, or fetched on its own
        verdict = await self.robots.verdict(url, held_host, self.frontier)
        if verdict is not Verdict.ALLOW:
            return "robots" if verdict is Verdict.DISALLOW else "robots_unavailable"
        await self.frontier.wait_host_ready(held_host)
        return None

    # -- robots.txt and sitemaps -------------------------------------------------
    async def _first_robots(self, site: str, entry: RobotsEntry) -> None:
        """An origin's robots.txt was read for the first time: queue its sitemaps."""
        if self._wants_sitemaps(site):
            found = sitemaps_of_origin(site, entry.rules.sitemaps, self.links)
            self._batch.add_requests(await self.frontier.filter_new(found))

    def _archive_robots(self, result: FetchResult, host: str) -> None:
        """A robots.txt download goes into the WARC and gets a row, as pages do."""
        self._batch.add_robots(result, robots_record(result, host))

    def _wants_sitemaps(self, site: str) -> bool:
        """Sitemaps of seed hosts, and of every in-scope host unless the scope is "any"."""
        if not self.config.sitemaps:
            return False
        host = host_key(site + "/")
        return host in self._seed_hosts or (
            self.config.scope != "any" and self.scope.allows(site + "/")
        )

    # -- seeds, commits, progress ----------------------------------------------------
    def _widen_scope(self, hosts: Iterable[str]) -> None:
        for host in hosts:
            self.scope.add_host(host)
            self._seed_hosts.add(host)

    async def _add_seeds(self) -> None:
        """New seeds, a chunk at a time, through the frontier's insert path: memory
        stays bounded however many. A chunk's hosts are kept with the job before
        its URLs, so a seed in the frontier is always in the kept scope."""
        added = False
        for chunk in self.seeds:
            added = True
            requests = [self.links.request(url, 0, None) for url in chunk]
            new_hosts = sorted({r.host for r in requests} - self._seed_hosts)
            if new_hosts:
                await self.backend.add_scope_hosts(new_hosts)
                self._widen_scope(new_hosts)
            fresh = await self.frontier.filter_new(requests)
            self._batch.add_requests(self.links.within_host_budget(fresh))
            await self._commit()
        if added:
            await self.backend.seeds_added()

    async def _commit_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._commit_wanted.wait(), COMMIT_INTERVAL_S)
            self._commit_wanted.clear()
            final = self._stopping and not self._tasks
            try:
                await self._commit()
            except Exception as exc:  # disk full, unwritable directory: stop, lose nothing
                log.error("cannot commit to the store: %s", exc)
                self._fatal = exc
                self.stop()
                return
            if final:
                return

    async def _commit(self) -> None:
        batch, self._batch = self._batch, CommitBatch()
        self._batch_taken.set()
        self._batch_taken = asyncio.Event()
        batch.counters = {f"rejected.{k}": v for k, v in self.links.rejected.items()}
        batch.counters.update(self._counters)
        self.links.rejected.clear()
        self._counters.clear()
        if not len(batch):
            return
        await self.backend.commit(batch)
        self.pages_stored += batch.pages

    async def _report_loop(self) -> None:
        assert self.on_progress is not None
        started, last_pages, last_t = time.monotonic(), self.pages_stored, time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            now, pages = time.monotonic(), self._pages_counted()
            rate = (pages - last_pages) / (now - last_t)
            last_pages, last_t = pages, now
            frontier = self.frontier
            snapshot = Progress(
                pages, rate, frontier.queued, frontier.active_hosts, self.errors, now - started,
                self.not_html,
            )  # fmt: skip
            self.on_progress(snapshot)


def _attempt_row(request: CrawlRequest, result: FetchResult, decision: str) -> tuple:
    return (request.url, request.attempts + 1, result.started_at, round(result.duration_s, 6),
            result.status, result.error, decision)  # fmt: skip


def _internal_error(url: str, exc: Exception) -> FetchResult:
    detail = f"{type(exc).__name__}: {exc}"
    return FetchResult(url, url, error="internal", error_detail=" ".join(detail.split()))


__all__ = ["Crawler", "Progress", "host_key"]
