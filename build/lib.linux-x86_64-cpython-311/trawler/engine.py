"""The crawl loop: wires frontier, fetcher, parser, link filter and store.

It decides no policy of its own (STYLE.md rule 1): robots verdicts come from
robots.py/robotscache.py, scope and traps from urls.py via linkfilter.py,
spacing from politeness.py, what a response means for the page from
outcome.py. It only orders the steps and owns the commit cadence.

One task per leased URL. ``concurrency`` bounds the requests in flight: a
task holds a request slot (``RequestSlot``) only while it talks to the host
(robots.txt, the page and its same-host redirect hops), never while it waits
out the host's interval (a host not ready yet after its robots.txt goes back
to the frontier, whose ready-heap does the waiting) nor while its page is
analysed. Up to ``TASKS_PER_SLOT`` times as many URLs may be between lease
and analysis; a page waiting for its analysis (or for room in the batch) holds
no task slot but its bytes, up to ``throttle.ANALYSIS_QUEUE_BYTES`` in the process:
a host whose turn has come is not kept waiting behind pages that only wait for
the parser.
A task holds its host from lease to the end of its response, so
one request is in flight per host. Results collect in a
batch that a commit task makes durable (commits.py); only
then are discovered URLs scheduled and leases acknowledged. A URL's result
(state, attempt rows, page, links found) joins the batch in one step, after
its last await, so a commit swapping the batch can never split it.

What the crawls of one process share comes in ``Services`` (services.py): the
host table, the HTTP connection pools, the robots.txt cache, the parser
processes, the operator's live politeness settings and blocklist. ``pause()``
leases nothing more; a URL leased before it goes back to the queue unfetched.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from trawler.analysis import AnalysisPool
from trawler.commits import Commits
from trawler.config import CrawlConfig
from trawler.discovery import Discovery
from trawler.fetch import Fetcher
from trawler.linkfilter import LinkFilter
from trawler.outcome import NOT_HTML, REDIRECT_ELSEWHERE, robots_record
from trawler.politeness import PolitenessPolicy
from trawler.provenance import via_of
from trawler.records import CrawlRequest, FetchResult, Progress
from trawler.recrawl_flow import (
    RevisitFlow,
    RevisitOptions,
    continuous_options,
    revisit_headers,
)
from trawler.recrawl_lanes import REVISIT
from trawler.renderflow import Rendering, render_bytes
from trawler.retry import RetryPolicy
from trawler.robotscache import RobotsEntry
from trawler.robotsgate import RobotsGate, Verdict
from trawler.scope import Scope, TrapRules
from trawler.services import PolitenessSettings, Services
from trawler.store.base import DEAD, DONE, RETRY, SKIPPED, Backend, UrlOutcome
from trawler.tdmgate import TdmGate
from trawler.throttle import PAGE_OVERHEAD_BYTES, RequestSlot, Throttle
from trawler.urls import Normaliser, host_key

log = logging.getLogger("trawler")

SHUTDOWN_GRACE_S = 5.0
# Leased URLs per request slot, not yet analysed: the others wait for their host's
# answer or for room in the analysis queue.
TASKS_PER_SLOT = 4
# A host whose next request is further off than this once its URL is leased (it just
# answered its robots.txt) goes back to the frontier rather than keep a request slot.
HAND_BACK_AFTER_S = 0.05


class Crawler:
    def __init__(
        self,
        config: CrawlConfig,
        backend: Backend,
        on_progress: Callable[[Progress], None] | None = None,
        seeds: Iterable[Sequence[str]] = (),
        services: Services | None = None,
        revisits: RevisitOptions | None = None,
    ) -> None:
        """``seeds``: chunks of normalised seed URLs to add (seeds.py), none on a resume.
        ``services``: the process's, shared with its other crawls; None: its own.
        ``revisits``: revisit stored pages too (recrawl_flow.py; embedded backend);
        None: as the job's config says (``recrawl``: a continuous job)."""
        self._own_services = services is None
        self.services = services or Services(
            connection_limit=config.concurrency, parse_processes=config.parse_processes
        )
        if services is not None:  # live settings change this copy, never the job's options
            config = config.model_copy()
        self.config = config
        self._job_politeness = (config.delay_s, config.max_crawl_delay_s)
        self._opened = False
        self.apply_politeness(self.services.politeness)
        self.backend = backend
        self.on_progress = on_progress
        self.seeds = seeds
        self.normalise = Normaliser(config.tracking_params)
        # Widened by the job's kept seed hosts and by new seeds in run().
        self.scope = Scope.from_hosts(config.scope, (), config.include, config.exclude)
        self._counters: Counter[str] = Counter()
        self.fetcher = Fetcher(config, connectors=self.services.http)
        waits = tuple(config.robots_retry_waits_s)
        self.robots = RobotsGate(
            self.fetcher, config.robots_token, waits, self._counters, self._first_robots,
            self._archive_robots, self.services.robots,
        )  # fmt: skip
        self.tdm = TdmGate(self.fetcher, self.robots, self._counters, self.services.robots)
        self.links = LinkFilter(
            self.normalise, self.scope, TrapRules(), config.max_depth, self.robots.allows,
            max_per_host=config.max_pages_per_host,
        )  # fmt: skip
        self.retry = RetryPolicy(max_attempts=config.max_attempts)
        self._rng = random.Random()  # retry jitter
        processes = config.parse_processes  # 0: inline; else the process's parsers
        if processes is None:
            processes = self.services.parsers.processes
        self.analysis = AnalysisPool(config, processes, self.services.parsers)
        self.discovery = Discovery(
            config, self.analysis, self.links, self.scope, self.services.blocklist, self._counters
        )
        self.discovery.robots_rule = self.robots.rule_of
        self.commits = Commits(backend, self._take_counters)
        revisits = revisits or continuous_options(config, backend)
        self.revisits = None if revisits is None else RevisitFlow(
            revisits, backend, self.discovery, self._counters, self.tdm  # type: ignore[arg-type]
        )  # fmt: skip
        self.robots.read_shared = revisits is None or not revisits.reread_robots
        self.rendering = None if config.render == "never" else Rendering(
            config, self.fetcher, self.robots, self._counters, self.services.browser
        )  # fmt: skip
        self.analysing = self.services.analysing  # the process's, over all its jobs
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.paused = False  # no new request starts; resume() goes on
        self._running = asyncio.Event()  # clear while paused
        self._running.set()
        self._fatal: BaseException | None = None
        self.pages_stored = 0  # committed pages, including those of earlier runs
        self.errors = 0
        self.not_html = 0  # successful non-HTML downloads, counted apart from errors
        self.exhausted = False

    # -- public ------------------------------------------------------------------
    async def run(self, stored_before: int) -> bool:
        """Crawl until done, stopped or the page budget is spent; True when complete."""
        self.pages_stored = stored_before
        if self.rendering is not None:  # first: a browser that cannot start opens nothing
            await self.rendering.start()
        self.frontier = await self.backend.open(self.config)
        self.frontier.share_hosts(self.services.hosts)
        self.discovery.importance = getattr(self.frontier, "importance", None)
        self._opened = True
        if self.config.max_pages_per_host is not None:
            counts = await self.backend.host_url_counts()
            if counts is None:  # the frontier keeps it, job-wide (redis_budget.py)
                self.links.max_per_host = None
            else:
                self.links.admitted.update(counts)
        self.discovery.widen_scope(await self.backend.scope_hosts())
        await self._add_seeds()
        await self._commit()
        if self.revisits is not None:
            await self.revisits.start(self.frontier)  # type: ignore[arg-type]
        self.analysis.start(sorted(self.discovery.seed_hosts))  # the scope is complete now
        await self.fetcher.start()
        committer = asyncio.create_task(self._commit_loop())
        reporter = asyncio.create_task(self._report_loop()) if self.on_progress else None
        try:
            await self._dispatch()
            await self._drain()
        except asyncio.CancelledError:  # a second signal: requests in flight are cut
            self._stopping = True
            await self._cut(self._tasks)
            raise
        finally:
            self._stopping = True
            if self.revisits is not None:
                await self.revisits.stop()
            self.commits.want()
            await committer
            if reporter:
                reporter.cancel()
            await self.fetcher.close()
            self.analysis.close()
            if self._own_services:
                await self.services.close()
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
            self._running.set()  # a paused dispatcher wakes up to stop
            if self._opened:  # else run() sees _stopping as soon as it has opened
                self.frontier.close()

    def pause(self) -> None:
        """Start no new request (robots.txt included); requests in flight finish and
        are committed, leased URLs not yet sent go back to the queue. The frontier
        and the store stay open: ``resume()`` goes on with nothing lost or fetched twice."""
        self.paused = True
        self._running.clear()

    def resume(self) -> None:
        self.paused = False
        self._running.set()

    def apply_politeness(self, settings: PolitenessSettings) -> None:
        """The operator's settings (Services.politeness), live: where set, they take
        the place of the job's --delay and --max-crawl-delay."""
        delay_s, max_crawl_delay_s = self._job_politeness
        self.config.delay_s = _first_set(settings.delay_s, delay_s)
        self.config.max_crawl_delay_s = _first_set(settings.max_crawl_delay_s, max_crawl_delay_s)
        if self._opened:
            self.frontier.set_policy(PolitenessPolicy.from_config(self.config))

    # -- dispatch ------------------------------------------------------------------
    async def _dispatch(self) -> None:
        concurrency = self.config.concurrency
        # Throttles, not asyncio.Semaphores: one waiter (this loop), and an acquire that
        # does not suspend is a comparison, not Semaphore.locked()'s scan of its waiters.
        requests = Throttle(concurrency)  # requests in flight (this job)
        tasks = Throttle(concurrency * TASKS_PER_SLOT)  # URLs leased, not in a batch
        throttle = self.services.throttle  # the process's limit over all jobs

        def release_request() -> None:
            requests.release()
            throttle.release()

        while not self._stopping:
            await tasks.acquire()
            await requests.acquire()  # a URL is leased only when it can be sent at once
            request = await self._lease()
            if request is None:
                requests.release()
                tasks.release()
                return
            await throttle.acquire()
            task_slot = RequestSlot(tasks.release)  # given up once its page is analysed
            task = asyncio.create_task(
                self._process(request, RequestSlot(release_request), task_slot)
            )
            self._tasks.add(task)
            task.add_done_callback(partial(self._task_done, task_slot))

    def _task_done(self, slot: RequestSlot, task: asyncio.Task[None]) -> None:
        """A task ended: out of the set, and its slot given back if it still holds it
        (it ended before its page's analysis: robots.txt, handed back, retried; or
        was cancelled before it ran)."""
        self._tasks.discard(task)
        slot.release()

    async def _lease(self) -> CrawlRequest | None:
        """The next URL to crawl, or None: stopping, budget spent, frontier exhausted."""
        if not self._running.is_set():
            await self._running.wait()
            if self._stopping:
                return None
        if self.config.max_pages is not None and not await self._within_budget():
            return None
        request = await self.frontier.next()
        if request is None:
            self.exhausted = not self._stopping
        return request

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
        return self.pages_stored + self.commits.batch.pages

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
        await self._cut(pending)

    @staticmethod
    async def _cut(tasks: set[asyncio.Task[None]]) -> None:
        """Cancel requests still in flight; their URLs stay queued (fetched again on
        resume). The commit loop ends only once no task is left."""
        pending = set(tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    # -- one URL -------------------------------------------------------------------
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
            self.commits.add(outcome)  # no await since the analysis: one commit gets it all
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

    # -- robots.txt and sitemaps -------------------------------------------------
    async def _first_robots(self, site: str, entry: RobotsEntry) -> None:
        """An origin's robots.txt was read for the first time: queue its sitemaps."""
        found = await self.discovery.origin_sitemaps(site, entry, self.frontier)
        self.commits.batch.add_requests(found)

    def _archive_robots(self, result: FetchResult, host: str) -> None:
        """A robots.txt download goes into the WARC and gets a row, as pages do."""
        self.commits.batch.add_robots(result, robots_record(result, host))

    # -- seeds, commits, progress ----------------------------------------------------
    async def _add_seeds(self) -> None:
        """New seeds, a chunk at a time, through the frontier's insert path: memory
        stays bounded however many. A chunk's hosts are kept with the job before
        its URLs, so a seed in the frontier is always in the kept scope."""
        added = False
        for chunk in self.seeds:
            added = True
            requests = [self.links.request(url, 0, None) for url in chunk]
            new_hosts = sorted({r.host for r in requests} - self.discovery.seed_hosts)
            if new_hosts:
                await self.backend.add_scope_hosts(new_hosts)
                self.discovery.widen_scope(new_hosts)
            fresh = await self.frontier.filter_new(requests)
            self.commits.batch.add_requests(self.links.within_host_budget(fresh))
            await self._commit()
        if added:
            await self.backend.seeds_added()

    async def _commit_loop(self) -> None:
        while True:
            await self.commits.wanted()
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
        self.pages_stored += await self.commits.commit()

    def _take_counters(self) -> dict[str, int]:
        counters = {f"rejected.{k}": v for k, v in self.links.rejected.items()}
        counters.update(self._counters)
        self.links.rejected.clear()
        self._counters.clear()
        return counters

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


def _first_set(value: float | None, default: float) -> float:
    return default if value is None else value


def _internal_error(url: str, exc: Exception) -> FetchResult:
    detail = f"{type(exc).__name__}: {exc}"
    return FetchResult(url, url, error="internal", error_detail=" ".join(detail.split()))


__all__ = ["Crawler", "Progress", "host_key"]
