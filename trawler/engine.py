"""The crawl loop: wires frontier, fetcher, parser, link filter and store.

It decides no policy of its own (STYLE.md rule 1): robots verdicts come from
robots.py/robotscache.py, scope and traps from urls.py via linkfilter.py,
spacing from politeness.py, what a response means for the page from
outcome.py. It only orders the steps and owns the commit cadence.

One task per leased URL, within the request and task throttles
(engine_dispatch.py); each task takes its URL from robots.txt to its outcome
in the batch (engine_url.py). Results collect in a batch that a commit task
makes durable (commits.py); only then are discovered URLs scheduled and leases
acknowledged.

What the crawls of one process share comes in ``Services`` (services.py): the
host table, the HTTP connection pools, the robots.txt cache, the parser
processes, the operator's live politeness settings and blocklist. ``pause()``
leases nothing more; a URL leased before it goes back to the queue unfetched.

``Crawler`` is built of parts, one module each, whose methods are its own (no
call on a page's path goes through a layer in front of them): ``Dispatcher``
(engine_dispatch.py) and ``UrlFlow`` (engine_url.py). This module holds the
rest: the wiring, the run and its controls (stop, pause, resume, live
politeness), robots.txt's callbacks, seeds, the commit loop and progress.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from trawler.analysis import AnalysisPool
from trawler.commits import Commits
from trawler.config import CrawlConfig
from trawler.discovery import Discovery
from trawler.engine_dispatch import TASKS_PER_SLOT, Dispatcher
from trawler.engine_url import UrlFlow
from trawler.fetch import Fetcher
from trawler.linkfilter import LinkFilter
from trawler.outcome import robots_record
from trawler.politeness import PolitenessPolicy
from trawler.records import FetchResult, Progress
from trawler.recrawl_flow import RevisitFlow, RevisitOptions, continuous_options
from trawler.renderflow import Rendering
from trawler.retry import RetryPolicy
from trawler.robotscache import RobotsEntry
from trawler.robotsgate import RobotsGate
from trawler.scope import Scope, TrapRules
from trawler.services import PolitenessSettings, Services
from trawler.store.base import Backend
from trawler.tdmgate import TdmGate
from trawler.urls import Normaliser, host_key

log = logging.getLogger("trawler")


class Crawler(Dispatcher, UrlFlow):
    """One job's crawl: URLs leased from its frontier, fetched, analysed and committed
    to its backend until done, stopped or the page budget is spent (module doc)."""

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
        self.discovery.robots_generation = lambda: self.robots.generation
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
        self.discovery.tell_known = (
            getattr(self.frontier, "seen_lasts", False) and self.discovery.importance is None
        )
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


def _first_set(value: float | None, default: float) -> float:
    return default if value is None else value


__all__ = ["TASKS_PER_SLOT", "Crawler", "Progress", "host_key"]
