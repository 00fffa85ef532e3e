"""Distributed mode: submit a job, run workers, list them.

A worker takes any job that still has work in Redis, crawls it with the same
engine as the embedded mode (only the backend differs), and moves on to the
next job; with ``exit_when_idle`` it exits once no job has work left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trawler.config import CrawlConfig
from trawler.engine import Crawler, Progress
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions, WorkerStatus, connect_redis
from trawler.linkfilter import LinkFilter
from trawler.politeness import PolitenessPolicy
from trawler.store.distributed import DistributedBackend, repair_dead_workers_warc
from trawler.store.postgres import PostgresStore
from trawler.urls import Normaliser, Scope, TrapRules

log = logging.getLogger("trawler")
IDLE_POLL_S = 2.0
ACTIVE_STATES = ("pending", "running")


@dataclass(slots=True)
class WorkerOptions:
    redis_url: str
    postgres_url: str
    warc_dir: Path
    worker_id: str
    exit_when_idle: bool = False
    lease_timeout_s: float = 60.0  # a killed worker's URLs go back to the queue after this


async def _frontier(redis_url: str, job_id: str, worker_id: str = "") -> RedisFrontier:
    options = RedisFrontierOptions(job_id=job_id, worker_id=worker_id, auto_renew=False)
    return await RedisFrontier.connect(redis_url, PolitenessPolicy(), options)


async def submit_job(redis_url: str, postgres_url: str, config: CrawlConfig) -> str:
    """Create the job in PostgreSQL and put its seeds into the shared frontier."""
    store = await PostgresStore.connect(postgres_url)
    try:
        # The job's row is committed only once its seeds are in Redis: a submit
        # that fails half-way leaves no job for workers to find.
        async with store.creating_job(config, state="running") as job_id:
            frontier = await _frontier(redis_url, job_id)
            try:
                normalise = Normaliser(config.tracking_params)
                scope = Scope(config.scope, config.seeds)
                links = LinkFilter(normalise, scope, TrapRules(), config.max_depth, lambda _u: None)
                seeds = [links.request(u, 0, None) for s in config.seeds if (u := normalise(s))]
                await frontier.commit(await frontier.filter_new(seeds), [])
            finally:
                await frontier.aclose()
        return job_id
    finally:
        await store.close()


async def job_work(redis_url: str, job_id: str) -> tuple[int, int]:
    """(queued, leased) URLs of a job in the shared frontier."""
    frontier = await _frontier(redis_url, job_id)
    try:
        queued, leased, _hosts = await frontier.stats()
        return queued, leased
    finally:
        await frontier.aclose()


async def job_frontier_stats(redis_url: str, job_id: str) -> dict[str, int]:
    """The shared frontier's numbers of a job, for `trawler stats`."""
    frontier = await _frontier(redis_url, job_id)
    try:
        queued, leased, _hosts = await frontier.stats()
        discovered = await frontier.urls_seen()
    finally:
        await frontier.aclose()
    return {"urls_discovered": discovered, "urls_queued": queued, "urls_leased": leased}


async def _pick_job(store: PostgresStore, redis_url: str) -> tuple[str, CrawlConfig] | None:
    """A job with URLs queued or in flight (oldest first); jobs with neither are finished.

    URLs in flight at other workers may still add work, so a worker joins such
    a job and waits in the frontier rather than leaving as idle.
    """
    for job in reversed(await store.list_jobs()):
        if job.state not in ACTIVE_STATES:
            continue
        queued, leased = await job_work(redis_url, job.id)
        if queued or leased:
            return job.id, CrawlConfig.model_validate(job.config)
        await store.set_job_state(job.id, "finished")
    return None


class Worker:
    def __init__(self, options: WorkerOptions, on_progress: Callable[[Progress], None] | None):
        self.options = options
        self.on_progress = on_progress
        self.crawler: Crawler | None = None
        self.stopping = False
        self.pages_done = 0

    def stop(self) -> None:
        self.stopping = True
        if self.crawler is not None:
            self.crawler.stop()

    async def _heartbeat(self, backend: DistributedBackend, crawler: Crawler, base: int) -> None:
        """Tell `trawler workers` this worker is alive, every second."""
        while True:
            with contextlib.suppress(Exception):  # a Redis restart must not stop the beat
                await _beat(backend, self, crawler, base)
            await asyncio.sleep(HEARTBEAT_S)

    async def run(self) -> None:
        options = self.options
        options.warc_dir.mkdir(parents=True, exist_ok=True)
        _repair_warc(options.warc_dir)
        store = await PostgresStore.connect(options.postgres_url)
        try:
            while not self.stopping:
                picked = await _pick_job(store, options.redis_url)
                if picked is None:
                    if options.exit_when_idle:
                        return
                    await asyncio.sleep(IDLE_POLL_S)
                    continue
                await self._crawl(store, *picked)
        finally:
            await store.close()
            # Again on the way out: a peer killed during this run leaves its file
            # whole for whoever reads the directory next, not only the next worker.
            _repair_warc(options.warc_dir)

    async def _crawl(self, store: PostgresStore, job_id: str, config: CrawlConfig) -> None:
        log.info("worker %s: crawling job %s", self.options.worker_id, job_id)
        options = self.options
        backend = DistributedBackend(
            store, options.redis_url, job_id, options.warc_dir, options.worker_id,
            options.lease_timeout_s,
        )  # fmt: skip
        self.crawler = crawler = Crawler(config, backend, on_progress=self.on_progress)
        stored = (await store.read_stats(job_id))["pages_stored"]
        beating = asyncio.create_task(self._heartbeat(backend, crawler, stored))
        try:
            complete = await crawler.run(stored)
        finally:
            beating.cancel()
        self.pages_done += crawler.pages_stored - stored
        self.crawler = None
        if complete:
            await store.set_job_state(job_id, "finished")


HEARTBEAT_S = 1.0


def _repair_warc(warc_dir: Path) -> None:
    for name in repair_dead_workers_warc(warc_dir):
        log.info("repaired WARC file left by a crashed worker: %s", name)


async def _beat(backend: DistributedBackend, worker: Worker, crawler: Crawler, base: int) -> None:
    frontier = backend.frontier
    if frontier is not None:
        done = worker.pages_done + crawler.pages_stored - base
        await frontier.heartbeat(worker.options.worker_id, done, frontier.current_host)


async def list_workers(redis_url: str) -> list[WorkerStatus]:
    frontier = await _frontier(redis_url, "-")
    try:
        return await frontier.list_workers()
    finally:
        await frontier.aclose()


__all__ = ["Worker", "WorkerOptions", "connect_redis", "list_workers", "submit_job"]
