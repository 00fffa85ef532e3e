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
(``AnalysisPool``) or inline (``--parse-processes 0``). The processes are the
process's (parsers.py), shared by its jobs; each batch names its job's setup. The robots.txt check
of the links stays in the loop, which owns the robots cache. Only pages that are
parsed make the trip (``is_parsed``): an error, a 404 or a PDF costs no parsing,
and its analysis is cheaper in the loop than the trip. A page goes, and its
analysis comes back, as plain tuples (analysis_codec.py).

Sitemaps up to ``SITEMAP_IN_PROCESS_MAX_BYTES`` (~2,000 URLs) are read in a
parser process too, one a message; larger ones on a thread (``analyse_sitemap``):
a 50,000-URL sitemap takes about a second to parse and filter, which froze
every host when done on the loop, and would hold up every HTML page queued
behind it in the parser process. Small ones on threads held the crawl
process's GIL instead: on the 2,000-host benchmark its sitemaps took 3.5 s to
read at the start, the loop and the writer starved meanwhile (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from collections import Counter, deque
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, replace
from functools import partial

from trawler.analysis_codec import (
    Analysis,
    PageItem,
    SitemapAnalysis,
    flatten_analysis,
    from_page_item,
    page_item,
    request_values,
    unflatten_analysis,
    unflatten_sitemap,
)
from trawler.config import CrawlConfig
from trawler.graph import page_edges
from trawler.heap import keep_heap_top
from trawler.knownlinks import KnownNews, News, Stamp, forget, known_of
from trawler.linkfilter import LinkFilter
from trawler.outcome import HTML_TYPES, page_outcome, sniffed_type
from trawler.parserpipe import ParserBroken, ParserPipe
from trawler.parsers import (
    ParserProcesses,
    SetupRef,
    answer_unused,
    exit_code,
    start_parser_process,
)
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.scope import Scope, TrapRules
from trawler.sitemapflow import sitemap_outcome
from trawler.urls import Normaliser

log = logging.getLogger("trawler")
# Pages go to the worker in batches: per-call overhead (pickling, futures, thread
# wake-ups) cost as much as the parsing itself when sent one page at a time.
BATCH_MAX = 64
BATCH_WAIT_S = 0.005
SITEMAP_IN_PROCESS_MAX_BYTES = 256 * 1024


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


# A parser process's Analysers, one per job's setup, built the first time a batch
# of the job reaches the process (the process exists to hold them); the crawl
# process never reads this: it passes its own.
_PROCESS_ANALYSERS: dict[str, Analyser] = {}
_ANALYSERS_KEPT = 32  # jobs; the oldest setup is read again if its job comes back


def _analyser_for(setup: SetupRef) -> Analyser:
    """In a parser process: the job's analyser, its setup read once (parsers.py)."""
    key, path = setup
    analyser = _PROCESS_ANALYSERS.get(key)
    if analyser is None:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
        if len(_PROCESS_ANALYSERS) >= _ANALYSERS_KEPT:
            del _PROCESS_ANALYSERS[next(iter(_PROCESS_ANALYSERS))]
        analyser = Analyser.build(data["config"], data["scope_hosts"])
        # One link memo for the jobs whose links it serves alike: one bound in all.
        any(analyser.links.share_memo(other.links) for other in _PROCESS_ANALYSERS.values())
        _PROCESS_ANALYSERS[key] = analyser
    return analyser


def analyse(
    analyser: Analyser, request: CrawlRequest, result: FetchResult, known: Container[int] = ()
) -> Analysis:
    """``known``: fingerprints of links the loop has taken already (knownlinks.py)."""
    links = analyser.links
    outcome = page_outcome(request, result, analyser.config, analyser.agent_token)
    requests = links.requests_for(outcome.links, request.url, request.depth + 1, known)
    rejected = dict(links.rejected)
    links.rejected.clear()
    edges = page_edges(outcome.found, links, request.depth + 1, outcome.nofollow)
    anchors, skipped, links.anchors, links.skipped = links.anchors, links.skipped, [], []
    # Consumed: the requests and edges replace them (and a parser process sends neither).
    outcome.links, outcome.found, outcome.nofollow = [], [], False
    elsewhere = _canonical_elsewhere(links.normalised, outcome.page, request)
    return Analysis(outcome, requests, rejected, elsewhere, edges, anchors, skipped)


def _canonical_elsewhere(
    normalise: Callable[[str], str | None], page: PageRecord, request: CrawlRequest
) -> str | None:
    """A page whose canonical URL is another one is a duplicate of it. Normalised
    here, not in the loop: most pages name themselves, and then nothing is left
    for the loop to do."""
    if page.canonical is None:
        return None
    canonical = normalise(page.canonical)
    if canonical is None or canonical in (request.url, normalise(page.final_url)):
        return None
    page.duplicate_of = canonical
    return canonical


def is_parsed(result: FetchResult) -> bool:
    """Whether ``page_outcome`` parses the page (the other branches cost no parsing:
    those pages are not worth a trip to a parser process)."""
    return (
        result.error is None
        and result.status is not None
        and 200 <= result.status < 300
        and sniffed_type(result.content_type, result.body) in HTML_TYPES
    )


def analyse_batch(setup: SetupRef, items: list[PageItem], news: News | None = None) -> list[tuple]:
    """``analyse`` for many pages of one job in a parser process, each within the CPU
    limit, answered as plain tuples: unpickling dataclasses in the crawl process cost
    as much as the parsing saved (bench/RESULTS.md). ``news``: links the loop has
    taken since its last batch (knownlinks.py)."""
    known = known_of(news)
    return [
        flatten_analysis(analyse_limited(setup, *from_page_item(item), known)) for item in items
    ]


def analyse_limited(
    setup: SetupRef, request: CrawlRequest, result: FetchResult, known: Container[int] = ()
) -> Analysis:
    """``analyse`` in a parser process: past the page's CPU time the process dies.

    A timer, not a check between steps: the time goes inside lexbor's C code,
    which no Python-level signal handler can interrupt. SIGPROF's default
    action ends the process; the crawler sees the pool break (AnalysisPool).
    """
    analyser = _analyser_for(setup)
    signal.setitimer(signal.ITIMER_PROF, analyser.config.parse_time_limit_s)  # CPU time
    try:
        return analyse(analyser, request, result, known)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def warm_up(setup: SetupRef) -> None:
    """In a parser process as its job starts: read the job's setup and analyse one
    small page, so that the crawl's first pages do not wait for the imports, the
    setup's build and the first calls (the benchmark's 2,000 home pages waited up
    to 4.7 s for the first answers: bench/RESULTS.md). Its answer is not used."""
    url = "http://warm-up.invalid/"
    body = b'<html><title>t</title><p>Warm up.</p><a href="/next">next</a></html>'
    result = FetchResult(url, url, 200, content_type="text/html", body=body)
    analyse_limited(setup, CrawlRequest(url, 0, None, "warm-up.invalid"), result)


def analyse_sitemap(
    analyser: Analyser, request: CrawlRequest, result: FetchResult
) -> SitemapAnalysis:
    """A fetched sitemap's URLs through the link filter; thread-safe: a filter of its
    own (its counters), around the scope and normaliser built once, which only read.
    Building the scope per sitemap normalised every seed again: with 2,000 seeds
    and 2,000 sitemaps that stalled the crawl for 20 s (bench/RESULTS.md)."""
    links = replace(analyser.links, rejected=Counter(), admitted=Counter(), skipped=[], anchors=[])
    counters: Counter[str] = Counter()
    found, listed = sitemap_outcome(request, result, links, analyser.config.sitemap_depth,
                                    counters)  # fmt: skip
    return SitemapAnalysis(found, listed, counters, links.rejected, links.skipped)


def analyse_sitemap_limited(setup: SetupRef, item: PageItem) -> tuple:
    """``analyse_sitemap`` in a parser process, within the page CPU limit (see
    ``analyse_limited``), answered as plain tuples."""
    analyser = _analyser_for(setup)
    request, result = from_page_item(item)
    signal.setitimer(signal.ITIMER_PROF, analyser.config.parse_time_limit_s)
    try:
        found = analyse_sitemap(analyser, request, result)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    requests = [request_values(r) for r in found.requests]  # every field: lastmod, changefreq
    return requests, found.listed, dict(found.counters), dict(found.rejected), found.skipped


def _next_starts_anew(_pipe: ParserPipe) -> None:
    """The suspects' process died: the next suspect starts another (``_analyse_alone``)."""


Waiting = tuple[CrawlRequest, FetchResult, "asyncio.Future[Analysis]"]


class AnalysisPool:
    """Runs ``analyse`` in worker processes, inline when there are none.

    ``start`` (once the job's scope is known) hands the processes the config and
    the scope hosts (parsers.py: once, as a file), and has each build the job's
    analyser and analyse a first page (``warm_up``) while the crawl fetches its
    robots.txt; batches then carry pages only.
    """

    def __init__(
        self, config: CrawlConfig, processes: int, shared: ParserProcesses | None = None
    ) -> None:
        """``processes``: 0 analyses inline; else the ``shared`` processes (Services)
        are used, or ``processes`` of its own when there are none."""
        self.config = config
        self.config_json = config.model_dump_json()
        self.processes = processes
        self._scope_hosts: list[str] = []
        self._analyser: Analyser | None = None  # this process's: inline pages, sitemaps
        self._own_parsers = shared is None
        self._parsers: ParserProcesses | None = None
        if processes > 0:
            self._parsers = shared if shared is not None else ParserProcesses(processes)
        else:
            keep_heap_top()  # the pages are parsed in this process (heap.py)
        self._setup: SetupRef = ("", "")
        self._started = False  # the processes have this job's setup
        self._waiting: list[Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._suspects: deque[Waiting] = deque()  # pages of a batch that broke the pool
        self._isolating: asyncio.Task[None] | None = None
        self._alone: ParserPipe | None = None  # one process, one suspect at a time
        self._known = KnownNews()  # links taken, for the processes (knownlinks.py)

    def start(self, scope_hosts: list[str]) -> None:
        """Build the analyser and start the processes for a job of this scope."""
        self._scope_hosts = sorted(scope_hosts)
        self._analyser = Analyser.build(self.config_json, self._scope_hosts)
        if self._parsers is not None:
            self._setup = self._parsers.register(self.config_json, self._scope_hosts)
            for warming in self._parsers.submit_to_each(warm_up, self._setup):
                warming.add_done_callback(answer_unused)  # the pages queue behind it
            self._started = True

    @property
    def analyser(self) -> Analyser:
        assert self._analyser is not None, "AnalysisPool.start() first"
        return self._analyser

    async def analyse(self, request: CrawlRequest, result: FetchResult) -> Analysis:
        if not self._started or not result.body or not is_parsed(result):
            return analyse(self.analyser, request, result)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Analysis] = loop.create_future()
        self._waiting.append((request, result, future))
        if len(self._waiting) >= BATCH_MAX:
            self._submit()
        elif self._timer is None:
            self._timer = loop.call_later(BATCH_WAIT_S, self._submit)
        return await future

    def tell_known(self, fps: Iterable[int], stamp: Stamp) -> None:
        """Page links that reached the seen set, allowed, under the verdicts of
        ``stamp``: the processes leave them out from the next batch on (knownlinks.py)."""
        if self._parsers is not None:
            self._known.tell(fps, stamp)

    async def analyse_sitemap(self, request: CrawlRequest, result: FetchResult) -> SitemapAnalysis:
        """In a parser process when small (a process broken by it: on a thread)."""
        if self._started and len(result.body) <= SITEMAP_IN_PROCESS_MAX_BYTES:
            assert self._parsers is not None
            item = page_item(request, result)
            with contextlib.suppress(ParserBroken):
                flat = await self._parsers.submit(analyse_sitemap_limited, self._setup, item)
                return unflatten_sitemap(flat)
        return await asyncio.to_thread(analyse_sitemap, self.analyser, request, result)

    def _submit(self) -> None:
        """Send the waiting pages as one batch: one pickle and one wake-up for many pages."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        if not batch or self._parsers is None:
            return
        items = [page_item(request, result) for request, result, _ in batch]
        parsers = self._parsers
        slot = parsers.least_busy()
        news = self._known.take(slot, parsers.processes)  # each process learns all of it
        done = parsers.submit_to(slot, analyse_batch, self._setup, items, news)
        done.add_done_callback(partial(self._deliver, batch))

    def _deliver(self, batch: list[Waiting], finished: asyncio.Future[list]) -> None:
        if finished.cancelled():
            return
        error = finished.exception()
        if error is None:
            for (_, _, future), flat in zip(batch, finished.result(), strict=True):
                if not future.done():
                    future.set_result(unflatten_analysis(flat))
            return
        if not isinstance(error, ParserBroken):
            for _, _, future in batch:  # a bug: delivered to the pages' tasks
                if not future.done():
                    future.set_exception(error)
            return
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
        if self._alone is None or not self._alone.open:
            loop = asyncio.get_running_loop()
            self._alone = ParserPipe(loop, start_parser_process, _next_starts_anew)
        alone = self._alone
        lite = replace(result, raw_body=b"", subresources=[])  # it parses the decoded body only
        try:
            return await alone.submit((analyse_limited, self._setup, request, lite))
        except ParserBroken:
            pass
        # How it ended says why: SIGPROF is the CPU limit (analyse_limited), anything
        # else a crash. Before, a break later than the limit in wall time was taken
        # for the limit and an earlier one for a crash; CI once saw a page over the
        # limit reported as a crash (issue 14, session 45).
        code = await asyncio.get_running_loop().run_in_executor(None, exit_code, alone.process)
        if code == -signal.SIGPROF:
            error, detail = "parse_too_complex", "over the parser's CPU time limit"
        else:
            error, detail = "parse_crash", f"the HTML parser crashed (exit code {code})"
        log.error("page analysis failed on %s: %s", request.url, detail)
        return analyse(self.analyser, request, replace(result, error=error, error_detail=detail))

    def close(self) -> None:
        """Shut down its own processes; the shared ones stay for the other jobs."""
        if self._alone is not None:
            self._alone.close()
        if self._parsers is not None and self._own_parsers:
            self._parsers.close()
        elif self._parsers is not None and self._started:  # the others' go on: drop its set
            self._parsers.tell_each(forget, self._known.token)
        self._started, self._alone = False, None
        if self._isolating is not None:
            self._isolating.cancel()
