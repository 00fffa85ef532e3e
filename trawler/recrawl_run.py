"""The revisit loop: fetch stored pages again when due, with conditional GET.

One pass (``trawler recrawl``) revisits every stored page now; continuous mode
(``trawler recrawl --continuous``, ``trawler crawl --recrawl``) keeps running and
revisits each page when its estimated interval (recrawl.py) has passed, until
``stop()`` (SIGINT, SIGTERM) or ``max_seconds``.

Politeness: each host has one worker, so one request is in flight per host, and
consecutive requests to it (robots.txt, pages, same-host redirect hops) start at
least max(--delay, its robots.txt Crawl-delay) apart, measured both from the
moment the previous one was sent (as politeness.py measures it) and from its
answer. ``concurrency`` bounds the hosts
fetched at once. In ``crawl --recrawl`` the revisits start once the crawl has
drained its frontier, so they never take a host's turn from a new URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from trawler.config import CrawlConfig
from trawler.fetch import Fetcher
from trawler.outcome import REDIRECT_ELSEWHERE
from trawler.politeness import SPACING_MARGIN_S
from trawler.recrawl import RevisitWindow
from trawler.recrawl_robots import HostRobots, robots_url
from trawler.recrawl_store import RecrawlStore
from trawler.recrawl_visit import conditional_headers, judge
from trawler.store import versions as v
from trawler.urls import host_key

log = logging.getLogger("trawler")
T = TypeVar("T")
_POLL_S = 0.25  # how often continuous mode looks for pages come due


@dataclass(slots=True)
class RecrawlOptions:
    window: RevisitWindow = field(default_factory=RevisitWindow)
    continuous: bool = False
    max_seconds: float | None = None


@dataclass(slots=True)
class RecrawlTotals:
    """What a run did, by verdict, and the body bytes it received."""

    visits: dict[str, int] = field(default_factory=dict)
    body_bytes: int = 0


@dataclass(slots=True)
class _HostLane:
    """One host's queue of due pages and when its next request may start (monotonic)."""

    queue: deque[v.RevisitState] = field(default_factory=deque)
    next_allowed_at: float = 0.0
    interval_s: float = 0.0  # start to start
    worker: asyncio.Task[None] | None = None
    robots: HostRobots | None = None

    def sent(self, at: float) -> None:
        """A request to the host left at ``at`` (monotonic): the next waits its interval."""
        self.next_allowed_at = max(self.next_allowed_at, at + self.interval_s)

    def answered(self) -> None:
        """The answer is in: the next request also waits the interval from now. A server
        that took the request late (a new connection to accept) still sees the interval
        between the two, which spacing from the send alone does not promise."""
        self.next_allowed_at = max(self.next_allowed_at, time.monotonic() + self.interval_s)


class Recrawler:
    def __init__(self, job_dir: Path, config: CrawlConfig, options: RecrawlOptions) -> None:
        self.config = config
        self.options = options
        self.store = RecrawlStore(job_dir, config.warc_max_bytes)
        self.fetcher = Fetcher(config)
        self.totals = RecrawlTotals()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="trawler-recrawl")
        self._stop = asyncio.Event()
        self._lanes: dict[str, _HostLane] = {}
        self._queued: set[str] = set()
        self._crawl_delays: dict[str, float] = {}

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> RecrawlTotals:
        window = self.options.window
        deadline = None
        if self.options.max_seconds is not None:
            deadline = time.monotonic() + self.options.max_seconds
        await self._in_writer(self.store.seed, window)
        self._crawl_delays = await self._in_writer(self.store.host_delays)
        await self.fetcher.start()
        semaphore = asyncio.Semaphore(self.config.concurrency)
        try:
            if self.options.continuous:
                await self._continuous(semaphore, deadline)
            else:
                await self._queue(await self._in_writer(v.due_states, self.store.conn, None),
                                  semaphore)  # fmt: skip
                await self._wait_lanes(deadline)
        finally:
            self._stop.set()
            await self._wait_lanes(None)
            await self.fetcher.close()
            await self._in_writer(self.store.close)
            self._writer.shutdown()
        return self.totals

    async def _continuous(self, semaphore: asyncio.Semaphore, deadline: float | None) -> None:
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return
            due = await self._in_writer(v.due_states, self.store.conn, time.time())
            await self._queue(due, semaphore)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), _POLL_S)

    async def _queue(self, due: list[v.RevisitState], semaphore: asyncio.Semaphore) -> None:
        for state in due:
            if state.url in self._queued:
                continue
            self._queued.add(state.url)
            lane = self._lanes.setdefault(state.host, _HostLane())
            lane.queue.append(state)
            if lane.worker is None or lane.worker.done():
                lane.worker = asyncio.create_task(self._drain_lane(state.host, lane, semaphore))

    async def _wait_lanes(self, deadline: float | None) -> None:
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        if not workers:
            return
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        _done, pending = await asyncio.wait(workers, timeout=timeout)
        if pending:
            self._stop.set()
            await asyncio.wait(pending)

    async def _drain_lane(self, host: str, lane: _HostLane, semaphore: asyncio.Semaphore) -> None:
        """Visit the host's due pages one at a time, spaced by its interval, its
        robots.txt read again first (recrawl_robots.py)."""
        if lane.robots is None:
            config = self.config
            lane.robots = HostRobots(config.robots_token, tuple(config.robots_retry_waits_s))
            lane.interval_s = self._interval_s(self._crawl_delays.get(host))
        while lane.queue and await self._turn(lane):
            if lane.robots.needs_fetch():
                async with semaphore:
                    await self._fetch_robots(host, lane, lane.queue[0].url)
                continue
            state = lane.queue.popleft()
            verdict = lane.robots.verdict(state.url)
            if verdict.allowed:
                async with semaphore:
                    await self._visit(state, lane)
            else:  # disallowed now, or robots.txt unavailable: not fetched, asked again later
                wait_s = self.options.window.max_s if verdict.known else self.options.window.min_s
                await self._in_writer(self.store.defer, state.url, time.time() + wait_s)
                self._count("robots" if verdict.known else "robots_unavailable")
            self._queued.discard(state.url)

    async def _turn(self, lane: _HostLane) -> bool:
        """Wait for the host's next allowed start; False when stopping."""
        wait_s = lane.next_allowed_at - time.monotonic()
        if wait_s > 0:
            with contextlib.suppress(TimeoutError):  # a stop ends the wait at once
                await asyncio.wait_for(self._stop.wait(), wait_s)
        return not self._stop.is_set()

    async def _hop_check(self, host: str, lane: _HostLane, target: str) -> str | None:
        """A redirect hop to the same host waits its turn like a request of its own;
        one to another host is not followed (that host's lane is not held)."""
        if host_key(target) != host:
            return REDIRECT_ELSEWHERE
        lane.answered()
        return None if await self._turn(lane) else "stopped"

    def _interval_s(self, crawl_delay_s: float | None) -> float:
        """As politeness.py: max(--delay, Crawl-delay capped), from one start to the next."""
        crawl_delay = min(crawl_delay_s or 0.0, self.config.max_crawl_delay_s)
        return max(self.config.delay_s, crawl_delay) + SPACING_MARGIN_S

    async def _fetch_robots(self, host: str, lane: _HostLane, page_url: str) -> None:
        assert lane.robots is not None
        result = await self.fetcher.fetch_robots(robots_url(page_url), on_sent=lane.sent)
        lane.answered()
        lane.robots.update(result)
        lane.interval_s = self._interval_s(lane.robots.verdict(page_url).crawl_delay_s)
        await self._in_writer(self.store.archive_robots, result, host)

    async def _visit(self, state: v.RevisitState, lane: _HostLane) -> None:
        result = await self.fetcher.fetch(
            state.url, hop_check=partial(self._hop_check, state.host, lane),
            on_sent=lane.sent, extra_headers=conditional_headers(state),
        )  # fmt: skip
        lane.answered()
        judgement = judge(state, result)
        try:
            await self._in_writer(
                self.store.commit_visit, state, result, judgement, self.options.window
            )
        except Exception as exc:  # noqa: BLE001 - one page's data; the disk fails the next too
            log.error("cannot record the revisit of %s: %s", state.url, exc)
            return
        self._count(judgement.verdict)
        self.totals.body_bytes += len(result.raw_body)

    def _count(self, verdict: str) -> None:
        self.totals.visits[verdict] = self.totals.visits.get(verdict, 0) + 1

    async def _in_writer(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)
