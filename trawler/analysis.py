"""Page analysis, off the event loop: parse, fingerprint, filter links.

Parsing HTML, SimHash and normalising links are pure CPU work, about a third
of what the crawl loop spends per page (bench/RESULTS.md). Run in a worker
process, they use a second core; the loop keeps only the I/O. The worker is
also a fence: a page that crashes the HTML parser costs that page
(``parse_crash``), never the crawl. Each page may use ``--parse-time-limit``
seconds of CPU there (SIGPROF ends the process past it): htmlbound.py refuses
the documents known to be costly before parsing; this catches the rest
(``parse_too_complex``). When a batch breaks the process, its pages are
analysed again one at a time in a process of their own, so the break is
pinned on one page, recorded with its error code and never parsed again.

``analyse`` is the one function both paths call: in the worker process
(``AnalysisPool``) or inline (``--parse-processes 0``). The robots.txt check
of the links stays in the loop, which owns the robots cache.

Sitemaps are read on a thread (``analyse_sitemap``): a 50,000-URL sitemap
takes about a second to parse and filter, which froze every host when done on
the loop, and would hold up every HTML page queued behind it in the parser
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields, replace
from operator import attrgetter

from trawler.config import CrawlConfig
from trawler.linkfilter import LinkFilter
from trawler.outcome import Outcome, page_outcome
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.sitemapflow import sitemap_outcome
from trawler.urls import Normaliser, Scope, TrapRules

log = logging.getLogger("trawler")
# Pages go to the worker in batches: per-call overhead (pickling, futures, thread
# wake-ups) cost as much as the parsing itself when sent one page at a time.
BATCH_MAX = 64
BATCH_WAIT_S = 0.005
PARENT_CHECK_S = 1.0


@dataclass(slots=True)
class Analysis:
    outcome: Outcome  # the page row; outcome.links emptied (the requests below replace them)
    requests: list[CrawlRequest]  # followable links in scope, not traps; robots not yet checked
    rejected: dict[str, int]  # links left out, by reason


@dataclass(slots=True)
class SitemapAnalysis:
    requests: list[CrawlRequest]  # child sitemaps and listed URLs; robots not yet checked
    listed: int  # entries the sitemap listed
    counters: Counter[str]  # sitemaps.* counters
    rejected: Counter[str]  # URLs left out, by reason


def _robots_unknown(_url: str) -> None:
    return None  # the loop checks robots.txt on the analysis' requests


@dataclass(slots=True)
class Analyser:
    """What analysing a page needs, built once per process from the config and
    the job's scope hosts: the parser processes get both once, at start."""

    config: CrawlConfig
    agent_token: str
    links: LinkFilter

    @classmethod
    def build(cls, config_json: str, scope_hosts: list[str]) -> Analyser:
        config = CrawlConfig.model_validate_json(config_json)
        scope = Scope.from_hosts(config.scope, scope_hosts, config.include, config.exclude)
        links = LinkFilter(Normaliser(config.tracking_params), scope, TrapRules(),
                           config.max_depth, _robots_unknown)  # fmt: skip
        return cls(config, config.robots_token, links)


# A parser process's one Analyser, set by its initializer (the process exists to
# hold it); the crawl process never reads this: it passes its own.
_PROCESS_ANALYSER: dict[str, Analyser] = {}


def _start_process(parent_pid: int, config_json: str, scope_hosts: list[str]) -> None:
    """Pool process start-up: the config arrives here, once, not with every batch."""
    _exit_with_parent(parent_pid)
    _PROCESS_ANALYSER["it"] = Analyser.build(config_json, scope_hosts)


def analyse(analyser: Analyser, request: CrawlRequest, result: FetchResult) -> Analysis:
    links = analyser.links
    outcome = page_outcome(request, result, analyser.config, analyser.agent_token)
    requests = links.requests_for(outcome.links, request.url, request.depth + 1)
    rejected = dict(links.rejected)
    links.rejected.clear()
    outcome.links = []
    return Analysis(outcome, requests, rejected)


def analyse_batch(items: list[tuple[CrawlRequest, FetchResult]]) -> list[tuple]:
    """``analyse`` for many pages in a parser process, each within the CPU limit,
    answered as plain tuples: unpickling dataclasses in the crawl process cost as
    much as the parsing saved (bench/RESULTS.md)."""
    return [_flatten(analyse_limited(request, result)) for request, result in items]


def analyse_limited(request: CrawlRequest, result: FetchResult) -> Analysis:
    """``analyse`` in a parser process: past the page's CPU time the process dies.

    A timer, not a check between steps: the time goes inside lexbor's C code,
    which no Python-level signal handler can interrupt. SIGPROF's default
    action ends the process; the crawler sees the pool break (AnalysisPool).
    """
    analyser = _PROCESS_ANALYSER["it"]
    signal.setitimer(signal.ITIMER_PROF, analyser.config.parse_time_limit_s)  # CPU time
    try:
        return analyse(analyser, request, result)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def analyse_sitemap(
    analyser: Analyser, request: CrawlRequest, result: FetchResult
) -> SitemapAnalysis:
    """A fetched sitemap's URLs through the link filter; thread-safe: a filter of its
    own (its counters), around the scope and normaliser built once, which only read.
    Building the scope per sitemap normalised every seed again: with 2,000 seeds
    and 2,000 sitemaps that stalled the crawl for 20 s (bench/RESULTS.md)."""
    links = replace(analyser.links, rejected=Counter(), admitted=Counter())
    counters: Counter[str] = Counter()
    found, listed = sitemap_outcome(request, result, links, analyser.config.sitemap_depth,
                                    counters)  # fmt: skip
    return SitemapAnalysis(found, listed, counters, links.rejected)


_PAGE_FIELDS = tuple(f.name for f in fields(PageRecord))
_page_values = attrgetter(*_PAGE_FIELDS)


def _flatten(analysis: Analysis) -> tuple:
    requests = [(r.url, r.depth, r.parent_url, r.host, r.fp) for r in analysis.requests]
    page = _page_values(analysis.outcome.page)
    return page, analysis.outcome.redirect_to, requests, analysis.rejected


def _unflatten(flat: tuple) -> Analysis:
    page_values, redirect_to, requests, rejected = flat
    outcome = Outcome(PageRecord(*page_values), redirect_to=redirect_to)
    return Analysis(outcome, [CrawlRequest(*r) for r in requests], rejected)


def _exit_with_parent(parent_pid: int) -> None:
    """Pool worker start-up: leave when the crawler dies (kill -9 included), instead
    of waiting forever on a queue nobody will write to. Ctrl-C is the parent's to
    handle: it stops the crawl, which shuts the pool down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="trawler-parent-watch", daemon=True).start()


def default_processes() -> int:
    """One analysis process per spare core (the crawl loop keeps one), at most 4."""
    return max(0, min(4, (multiprocessing.cpu_count() or 1) - 1))


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT in this process for the block (main thread only: elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


Waiting = tuple[CrawlRequest, FetchResult, "asyncio.Future[Analysis]"]


class AnalysisPool:
    """Runs ``analyse`` in worker processes, inline when there are none.

    ``start`` (once the job's scope is known) starts the processes and hands each
    the config and the scope hosts; batches then carry pages only.
    """

    def __init__(self, config: CrawlConfig, processes: int) -> None:
        self.config = config
        self.config_json = config.model_dump_json()
        self.processes = processes
        self._scope_hosts: list[str] = []
        self._analyser: Analyser | None = None  # this process's: inline pages, sitemaps
        self._pool: ProcessPoolExecutor | None = None
        self._waiting: list[Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._suspects: deque[Waiting] = deque()  # pages of a batch that broke the pool
        self._isolating: asyncio.Task[None] | None = None
        self._alone: ProcessPoolExecutor | None = None  # one process, one suspect at a time

    def start(self, scope_hosts: list[str]) -> None:
        """Build the analyser and start the processes for a job of this scope."""
        self._scope_hosts = sorted(scope_hosts)
        self._analyser = Analyser.build(self.config_json, self._scope_hosts)
        if self.processes > 0:
            self._pool = self._new_pool(self.processes)

    @property
    def analyser(self) -> Analyser:
        assert self._analyser is not None, "AnalysisPool.start() first"
        return self._analyser

    def _new_pool(self, processes: int) -> ProcessPoolExecutor:
        # spawn: a clean child (not a fork of a process with threads and a loop),
        # and a direct child, so it can tell when the crawler is gone.
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            processes, mp_context=context, initializer=_start_process,
            initargs=(os.getpid(), self.config_json, self._scope_hosts),
        )  # fmt: skip
        with _sigint_ignored():
            # Start every process now, SIGINT ignored: a child inherits that across
            # exec and Python then installs no KeyboardInterrupt handler, so a
            # Ctrl-C to the terminal's process group cannot interrupt a child even
            # while it starts (before the initializer runs). One task each: the pool
            # starts a process per task while none is idle.
            for _ in range(processes):
                pool.submit(os.getpid)
        return pool

    async def analyse(self, request: CrawlRequest, result: FetchResult) -> Analysis:
        if self._pool is None or not result.body:
            return analyse(self.analyser, request, result)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Analysis] = loop.create_future()
        lite = replace(result, raw_body=b"")  # the worker needs the decoded body only
        self._waiting.append((request, lite, future))
        if len(self._waiting) >= BATCH_MAX:
            self._submit()
        elif self._timer is None:
            self._timer = loop.call_later(BATCH_WAIT_S, self._submit)
        return await future

    async def analyse_sitemap(self, request: CrawlRequest, result: FetchResult) -> SitemapAnalysis:
        return await asyncio.to_thread(analyse_sitemap, self.analyser, request, result)

    def _submit(self) -> None:
        """Send the waiting pages as one batch: one pickle and one wake-up for many pages."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        pool = self._pool
        if not batch or pool is None:
            return
        items = [(request, result) for request, result, _ in batch]
        done = asyncio.wrap_future(pool.submit(analyse_batch, items))
        done.add_done_callback(lambda finished: self._deliver(pool, batch, finished))

    def _deliver(
        self, pool: ProcessPoolExecutor, batch: list[Waiting], finished: asyncio.Future[list]
    ) -> None:
        if finished.cancelled():
            return
        error = finished.exception()
        if error is None:
            for (_, _, future), flat in zip(batch, finished.result(), strict=True):
                if not future.done():
                    future.set_result(_unflatten(flat))
            return
        if not isinstance(error, BrokenProcessPool):
            for _, _, future in batch:  # a bug: delivered to the pages' tasks
                if not future.done():
                    future.set_exception(error)
            return
        if pool is self._pool:  # other batches on the same pool break too: restart once
            log.error("page analysis crashed in a batch of %d pages; restarting it", len(batch))
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool(self.processes)
        self._suspects.extend(batch)
        if self._isolating is None or self._isolating.done():
            self._isolating = asyncio.ensure_future(self._isolate())

    async def _isolate(self) -> None:
        """Analyse the suspects one at a time, so a break names its page."""
        while self._suspects:
            request, result, future = self._suspects.popleft()
            if future.done():
                continue
            try:
                future.set_result(await self._analyse_alone(request, result))
            except Exception as exc:  # noqa: BLE001 - delivered to the page's task
                future.set_exception(exc)

    async def _analyse_alone(self, request: CrawlRequest, result: FetchResult) -> Analysis:
        loop = asyncio.get_running_loop()
        if self._alone is None:
            self._alone = self._new_pool(1)
            await loop.run_in_executor(self._alone, os.getpid)  # started: not part of the time
        started = time.monotonic()
        try:
            return await loop.run_in_executor(self._alone, analyse_limited, request, result)
        except BrokenProcessPool:
            self._alone.shutdown(wait=False, cancel_futures=True)
            self._alone = None
        # CPU time never exceeds wall time: a break this late is the CPU limit.
        if time.monotonic() - started >= self.config.parse_time_limit_s:
            error, detail = "parse_too_complex", "over the parser's CPU time limit"
        else:
            error, detail = "parse_crash", "the HTML parser crashed"
        log.error("page analysis failed on %s: %s", request.url, detail)
        return analyse(self.analyser, request, replace(result, error=error, error_detail=detail))

    def close(self) -> None:
        for pool in (self._pool, self._alone):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._alone = None
        if self._isolating is not None:
            self._isolating.cancel()
