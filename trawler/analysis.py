"""Page analysis, off the event loop: parse, fingerprint, filter links.

Parsing HTML, SimHash and normalising links are pure CPU work, about a third
of what the crawl loop spends per page (bench/RESULTS.md). Run in a worker
process, they use a second core; the loop keeps only the I/O. The worker is
also a fence: a page that crashes the HTML parser costs that page
(``parse_crash``), never the crawl.

``analyse`` is the one function both paths call: in the worker process
(``AnalysisPool``) or inline (``--parse-processes 0``). The robots.txt check
of the links stays in the loop, which owns the robots cache.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace

from trawler.config import CrawlConfig
from trawler.linkfilter import LinkFilter
from trawler.outcome import Outcome, page_outcome
from trawler.records import CrawlRequest, FetchResult
from trawler.robots import user_agent_token
from trawler.urls import Normaliser, Scope, TrapRules

log = logging.getLogger("trawler")


@dataclass(slots=True)
class Analysis:
    outcome: Outcome  # the page row; outcome.links emptied (the requests below replace them)
    requests: list[CrawlRequest]  # followable links in scope, not traps; robots not yet checked
    rejected: dict[str, int]  # links left out, by reason


def _robots_unknown(_url: str) -> None:
    return None  # the loop checks robots.txt on the analysis' requests


@functools.cache
def _analyser(config_json: str) -> tuple[CrawlConfig, str, LinkFilter]:
    """Built once per process and config (the worker gets the config with each call)."""
    config = CrawlConfig.model_validate_json(config_json)
    scope = Scope(config.scope, config.seeds, config.include, config.exclude)
    links = LinkFilter(Normaliser(config.tracking_params), scope, TrapRules(), config.max_depth,
                       _robots_unknown)  # fmt: skip
    return config, user_agent_token(config.user_agent), links


def analyse(config_json: str, request: CrawlRequest, result: FetchResult) -> Analysis:
    config, agent_token, links = _analyser(config_json)
    outcome = page_outcome(request, result, config, agent_token)
    requests = links.requests_for(outcome.links, request.url, request.depth + 1)
    rejected = dict(links.rejected)
    links.rejected.clear()
    outcome.links = []
    return Analysis(outcome, requests, rejected)


def default_processes() -> int:
    """One analysis process per spare core (the crawl loop keeps one), at most 4."""
    return max(0, min(4, (multiprocessing.cpu_count() or 1) - 1))


class AnalysisPool:
    """Runs ``analyse`` in worker processes, inline when there are none."""

    def __init__(self, config: CrawlConfig, processes: int) -> None:
        self.config_json = config.model_dump_json()
        self.processes = processes
        self._pool: ProcessPoolExecutor | None = None
        if processes > 0:
            self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        # forkserver: a clean child, not a fork of a process with threads and a loop.
        context = multiprocessing.get_context("forkserver")
        return ProcessPoolExecutor(self.processes, mp_context=context)

    async def analyse(self, request: CrawlRequest, result: FetchResult) -> Analysis:
        if self._pool is None or not result.body:
            return analyse(self.config_json, request, result)
        lite = replace(result, raw_body=b"")  # the worker needs the decoded body only
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, analyse, self.config_json, request, lite)
        except BrokenProcessPool:
            log.error("page analysis crashed on %s; restarting the analysis process", request.url)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            crashed = replace(result, error="parse_crash", error_detail="the HTML parser crashed")
            return analyse(self.config_json, request, crashed)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
