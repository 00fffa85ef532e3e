"""Distributed mode: submit a job, run workers, list them.

A worker takes any job that still has work in Redis, crawls it with the same
engine as the embedded mode (only the backend differs), and moves on to the
next job; with ``exit_when_idle`` it exits once no job has work left. A job in
a revisit pass (jobs/postgres_passes.py) has its work in PostgreSQL: a worker
takes it, revisits its pages, and puts it back to its state once none is left.

A worker rides out an outage of Redis or PostgreSQL of any length: every call
is retried with back-off (outage.py), one log line says a service is lost and
one that it is back. Told to stop (SIGTERM) during an outage, it gives up what
it has not committed and exits at once. It beats for its whole life, idle or
crawling, and marks itself gone when it exits (frontier/workers.py).

While it crawls, a worker follows its job's state (pause, resume, cancel:
jobs/follow.py) and the operators' controls in PostgreSQL (blocklist and
politeness: jobs/controls.py), each polled every 0.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from trawler.config import CrawlConfig
from trawler.engine import Crawler
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.frontier.redis_conn import connect_redis
from trawler.frontier.workers import HEARTBEAT_S, WorkerRegistry, WorkerStatus
from trawler.jobs.controls import ControlStore, apply_controls, follow_controls
from trawler.jobs.follow import Controls, follow_job
from trawler.jobs.model import InvalidTransition, JobState
from trawler.jobs.postgres import PostgresJobStore
from trawler.jobs.postgres_controls import PostgresControlStore
from trawler.jobs.postgres_passes import end_pass, jobs_in_a_pass, pass_of
from trawler.linkfilter import LinkFilter
from trawler.outage import (
    OutageAbandoned,
    ServiceHealth,
    ServiceUnavailable,
    postgres_health,
    redis_health,
)
from trawler.politeness import PolitenessPolicy
from trawler.records import Progress
from trawler.recrawl import RevisitWindow
from trawler.recrawl_flow import RevisitOptions
from trawler.scope import Scope, TrapRules
from trawler.seeds import SeedSpool
from trawler.services import Services
from trawler.slowstop import end_task, wait_event
from trawler.store.distributed import DistributedBackend, repair_dead_workers_warc
from trawler.store.pg_passes import RevisitPass
from trawler.store.postgres import PostgresStore
from trawler.urls import Normaliser

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


async def _frontier(
    redis_url: str, job_id: str, health: ServiceHealth | None = None,
    max_pages_per_host: int | None = None,
) -> RedisFrontier:  # fmt: skip
    options = RedisFrontierOptions(
        job_id=job_id, auto_renew=False, max_pages_per_host=max_pages_per_host
    )
    return await RedisFrontier.connect(redis_url, PolitenessPolicy(), options, health)


async def submit_job(
    redis_url: str, postgres_url: str, config: CrawlConfig, seeds: SeedSpool
) -> str:
    """Create the job in PostgreSQL and stream its seeds into the shared frontier,
    ``CHUNK`` at a time (each Redis script call bounded). This is the job's only
    seeding: workers that join it add none."""
    store = await PostgresStore.connect(postgres_url)
    try:
        return await seed_job(store, redis_url, config, seeds)
    finally:
        await store.close()


async def seed_job(
    store: PostgresStore, redis_url: str, config: CrawlConfig, seeds: SeedSpool
) -> str:
    """``submit_job`` on an open store (`trawler serve --redis --postgres` keeps one)."""
    # The job's row (and its scope) is committed only once its seeds are in
    # Redis: a submit that fails half-way leaves no job for workers to find.
    async with store.creating_job(config, "running", sorted(seeds.hosts)) as job_id:
        # Seeds count against --max-pages-per-host, as in embedded mode.
        frontier = await _frontier(redis_url, job_id, None, config.max_pages_per_host)
        try:
            scope = Scope.from_hosts(config.scope, seeds.hosts)
            links = LinkFilter(Normaliser(config.tracking_params), scope, TrapRules(),
                               config.max_depth, lambda _u: None)  # fmt: skip
            for chunk in seeds.chunks():
                requests = [links.request(url, 0, None) for url in chunk]
                await frontier.commit(await frontier.filter_new(requests), [])
        finally:
            await frontier.aclose()
    return job_id


async def job_work(
    redis_url: str, job_id: str, health: ServiceHealth | None = None
) -> tuple[int, int]:
    """(queued, leased) URLs of a job in the shared frontier."""
    frontier = await _frontier(redis_url, job_id, health)
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


async def _pick_job(
    store: PostgresStore, redis_url: str, health: ServiceHealth
) -> tuple[str, CrawlConfig] | None:
    """A job with URLs queued or in flight (oldest first), else one in a revisit pass
    (its pages are fed from PostgreSQL), else a continuous one (--recrawl: its pages
    come due again); other jobs with none of these are finished.

    URLs in flight at other workers may still add work, so a worker joins such
    a job and waits in the frontier rather than leaving as idle. Paused and
    ended jobs are not picked.
    """
    jobs = PostgresJobStore(store)
    in_a_pass = await jobs_in_a_pass(store)
    revisiting: tuple[str, CrawlConfig] | None = None
    continuous: tuple[str, CrawlConfig] | None = None
    for job in reversed(await store.list_jobs(ACTIVE_STATES)):  # finished ones not read
        queued, leased = await job_work(redis_url, job.id, health)
        if queued or leased:
            return job.id, (await store.get_job(job.id))[0]
        config = (await store.get_job(job.id))[0]
        if job.id in in_a_pass:  # ended by the worker that finds none of its pages left
            revisiting = revisiting or (job.id, config)
        elif config.recrawl:  # runs until stopped (pages come due), after jobs with URLs
            continuous = continuous or (job.id, config)
        else:
            await _end_state(jobs, job.id, JobState.FINISHED, "complete")
    return revisiting or continuous


def _pass_run(
    config: CrawlConfig, revisit_pass: RevisitPass | None
) -> tuple[CrawlConfig, RevisitOptions | None]:
    """A revisit pass's crawl: every page of it once, in its window, the page budget
    not applied (the crawl's: a revisit stores no page, as recrawl_run.py)."""
    if revisit_pass is None:
        return config, None
    config = config.model_copy()
    config.max_pages = None
    bounds = revisit_pass.window  # the pass's; the policy is the job's own
    window = RevisitWindow(bounds.min_s, bounds.max_s, config.revisit_policy)
    return config, RevisitOptions(window, continuous=False, discovery=True)


async def _services_under_controls(config: CrawlConfig, store: ControlStore) -> Services:
    """The crawl's services (its own, as a `trawler crawl`'s), under the operators'
    controls from the start: a blocked domain gets no first request."""
    state = await store.state()
    services = Services(connection_limit=config.concurrency, parse_processes=config.parse_processes)
    apply_controls(state, services)
    return services


async def _end_state(jobs: PostgresJobStore, job_id: str, state: JobState, reason: str) -> None:
    """A change made unless another process changed the job first (paused, cancelled it)."""
    with contextlib.suppress(InvalidTransition):
        await jobs.transition(job_id, state, reason)


class Worker:
    def __init__(self, options: WorkerOptions, on_progress: Callable[[Progress], None] | None):
        self.options = options
        self.on_progress = on_progress
        self.redis_health = redis_health(options.redis_url)
        self.store_health = postgres_health(options.postgres_url)
        self.crawler: Crawler | None = None
        self.stopping = False
        self.pages_done = 0
        self._job_id: str | None = None
        self._backend: DistributedBackend | None = None
        self._pages_before = 0  # the job's pages stored when this worker joined it
        self._beat_done = asyncio.Event()
        self._beat_now = asyncio.Event()  # the state changed: beat without waiting
        self._started = time.monotonic()

    def stop(self) -> None:
        self.stopping = True
        self.redis_health.stop()  # calls waiting out an outage give up
        self.store_health.stop()
        if self.crawler is not None:
            self.crawler.stop()

    async def run(self) -> None:
        options = self.options
        options.warc_dir.mkdir(parents=True, exist_ok=True)
        _repair_warc(options.warc_dir)
        store, registry = await self._connect()
        beating = self.start_heartbeat(registry)
        try:
            await self._work(store)
        except (OutageAbandoned, ServiceUnavailable):
            if not self.stopping:  # only a stop gives up waiting out an outage
                raise
        finally:
            self._log_outage_at_stop()
            await self.stop_heartbeat(beating)
            await self._leave(registry)
            await store.close()
            # Again on the way out: a peer killed during this run leaves its file
            # whole for whoever reads the directory next, not only the next worker.
            _repair_warc(options.warc_dir)

    def _log_outage_at_stop(self) -> None:
        down = [h.name for h in (self.redis_health, self.store_health) if not h.up]
        if self.stopping and down:
            log.warning(
                "stopped during an outage of %s: URLs not committed will be fetched again",
                " and ".join(down),
            )

    async def _connect(self) -> tuple[PostgresStore, WorkerRegistry]:
        """Both services, reached once: unreachable at start is a configuration error,
        said at once; outages are ridden out only once the worker runs."""
        options = self.options
        store = await PostgresStore.connect(options.postgres_url, health=self.store_health)
        registry = WorkerRegistry(connect_redis(options.redis_url, 2), health=self.redis_health)
        try:
            await registry.redis.ping()
        except BaseException:
            await registry.redis.aclose()
            await store.close()
            raise
        return store, registry

    async def _work(self, store: PostgresStore) -> None:
        while not self.stopping:
            picked = await _pick_job(store, self.options.redis_url, self.redis_health)
            if picked is None:
                if self.options.exit_when_idle:
                    return
                await asyncio.sleep(IDLE_POLL_S)
                continue
            await self._crawl(store, *picked)

    async def _crawl(self, store: PostgresStore, job_id: str, config: CrawlConfig) -> None:
        log.info("worker %s: crawling job %s", self.options.worker_id, job_id)
        options = self.options
        jobs = PostgresJobStore(store)
        if await jobs.state(job_id) is JobState.PENDING:
            await _end_state(jobs, job_id, JobState.RUNNING, "started")
        self._pages_before = (await store.read_stats(job_id))["pages_stored"]
        backend = DistributedBackend(
            store, options.redis_url, job_id, options.warc_dir, options.worker_id,
            options.lease_timeout_s, self.redis_health,
        )  # fmt: skip
        self._job_id, self._backend = job_id, backend
        revisit_pass = await pass_of(store, job_id)
        config, revisits = _pass_run(config, revisit_pass)
        backend.pass_due_at = revisit_pass.due_at if revisit_pass is not None else None
        controls_store = PostgresControlStore(store)
        services = await _services_under_controls(config, controls_store)
        self.crawler = crawler = Crawler(
            config, backend, on_progress=self.on_progress, services=services, revisits=revisits
        )
        self._beat_now.set()  # listed as live at once
        # Paused or cancelled elsewhere: this worker leaves the job (in-flight requests
        # finish and are committed); a resumed job is picked again like any other.
        controls = Controls(pause=crawler.stop, resume=lambda: None, stop=crawler.stop)
        following = [
            asyncio.create_task(follow_job(partial(jobs.state, job_id), controls)),
            asyncio.create_task(
                follow_controls(controls_store, services, crawler.apply_politeness)
            ),
        ]
        try:
            complete = await crawler.run(self._pages_before)
        finally:
            for task in following:
                task.cancel()
            self.pages_done += crawler.pages_stored - self._pages_before
            self.crawler = None
            self._beat_now.set()  # listed as idle at once, not a beat later
            await services.close()
            await backend.close()  # already closed unless the crawl could not start
        if complete and revisit_pass is not None:  # back to the state it had
            await end_pass(store, job_id)
        elif complete:
            await _end_state(jobs, job_id, JobState.FINISHED, "complete")

    def start_heartbeat(self, registry: WorkerRegistry) -> asyncio.Task[None]:
        """The beat, until ``stop_heartbeat``."""
        self._beat_done = asyncio.Event()
        return asyncio.create_task(self._heartbeat(registry, self._beat_done))

    async def stop_heartbeat(self, beating: asyncio.Task[None]) -> None:
        """End the beat. Cancelling alone is not enough: a client may turn the
        cancellation of a beat in flight into an ordinary error (redis-py: "Timeout
        connecting to server"), which the loop logs and goes on from, or swallow it
        (slowstop.py); the ``done`` event ends the loop whatever happens to the
        cancellation, and ``end_task`` cancels again until it has ended."""
        self._beat_done.set()
        self._beat_now.set()
        await end_task(beating)

    async def _heartbeat(self, registry: WorkerRegistry, done: asyncio.Event) -> None:
        """Tell `trawler workers` this worker is alive, every second of its life."""
        while not done.is_set():
            try:  # an outage waits inside heartbeat(); nothing else may end the beat
                await registry.heartbeat(self.options.worker_id, *self._beat())
            except Exception as exc:
                log.debug("heartbeat failed: %s", exc)
            await wait_event(self._beat_now, HEARTBEAT_S)
            self._beat_now.clear()

    def _beat(self) -> tuple[str, str | None, int, str | None, float]:
        """(state, job, pages done, current host, uptime) for the next heartbeat."""
        crawler, backend = self.crawler, self._backend
        uptime_s = time.monotonic() - self._started
        if crawler is None or backend is None:
            return "idle", self._job_id, self.pages_done, None, uptime_s
        done = self.pages_done + crawler.pages_stored - self._pages_before
        host = backend.frontier.current_host if backend.frontier is not None else None
        return "live", self._job_id, done, host, uptime_s

    async def _leave(self, registry: WorkerRegistry) -> None:
        """Listed as gone from now on; if Redis is down, the beat goes stale instead."""
        try:
            await registry.mark_gone(self.options.worker_id)
        except Exception as exc:
            log.info("could not mark this worker gone: %s", exc)
        finally:
            await registry.redis.aclose()


def _repair_warc(warc_dir: Path) -> None:
    for name in repair_dead_workers_warc(warc_dir):
        log.info("repaired WARC file left by a crashed worker: %s", name)


async def list_workers(redis_url: str) -> list[WorkerStatus]:
    registry = WorkerRegistry(connect_redis(redis_url, 2))
    try:
        return await registry.list()
    finally:
        await registry.redis.aclose()


__all__ = ["Worker", "WorkerOptions", "connect_redis", "list_workers", "submit_job"]
