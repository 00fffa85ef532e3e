"""``JobService`` over the distributed backend: jobs in PostgreSQL, frontiers in
Redis, crawled by `trawler worker`s (`trawler serve --redis URL --postgres URL`).

This process crawls nothing. Creating a job is what `trawler submit` does (the
job's row, then its seeds streamed into Redis in bounded chunks: worker.seed_job);
pause, resume and cancel are job-store transitions, which every worker follows
within 2 s (jobs/follow.py); a revisit pass is recorded for the workers to carry
out (jobs/postgres_passes.py); operators' controls live in PostgreSQL
(``StoredControls`` over ``PostgresControlStore``), which every worker follows
within 2 s too (jobs/controls.py). Reads go through a blocking connection pool
on worker threads (api/pgreader.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import redis
from psycopg_pool import ConnectionPool

from trawler.api.deps import StoreUnavailable
from trawler.api.pgreader import PostgresJobReader
from trawler.config import CrawlConfig
from trawler.frontier.redis_conn import connect_redis
from trawler.frontier.redis_view import FrontierView, connect_view
from trawler.frontier.workers import WorkerRegistry
from trawler.jobs.model import JobInfo, JobState, UnknownJob
from trawler.jobs.postgres import PostgresJobStore
from trawler.jobs.postgres_passes import check_pausable, start_pass
from trawler.recrawl import RevisitWindow
from trawler.seeds import SeedSpool
from trawler.store import postgres_read
from trawler.store.postgres import PostgresStore

T = TypeVar("T")
POOL_TIMEOUT_S = 3.0  # a read waits this long for a connection, then 503
# A server down or unreachable (PoolTimeout is an OperationalError): 503. Any other
# error is a bug to see, not an outage to report.
DOWN = (psycopg.OperationalError, psycopg.InterfaceError, redis.ConnectionError,
        redis.TimeoutError, redis.exceptions.ClusterDownError, OSError)  # fmt: skip


class DistributedJobs:
    def __init__(self, store: PostgresStore, pool: ConnectionPool, redis_url: str) -> None:
        self.store = store
        self.jobs = PostgresJobStore(store)
        self.pool = pool
        self.redis_url = redis_url
        self.redis = connect_view(redis_url)  # a cluster's too (redis_view.py)

    @classmethod
    async def connect(cls, redis_url: str, postgres_url: str) -> DistributedJobs:
        """Both servers reached once: ``PostgresUnavailable`` or a Redis error if not."""
        store = await PostgresStore.connect(postgres_url, timeout_s=5)
        try:
            await _ping_redis(redis_url)
            pool = ConnectionPool(postgres_url, min_size=1, max_size=4, timeout=POOL_TIMEOUT_S,
                                  open=False, name="trawler-api")  # fmt: skip
            await asyncio.to_thread(pool.open, True, 5.0)
        except BaseException:
            await store.close()
            raise
        return cls(store, pool, redis_url)

    async def close(self) -> None:
        await asyncio.to_thread(self.pool.close)
        self.redis.close()
        await self.store.close()

    async def list_jobs(
        self, states: frozenset[JobState] | None, offset: int, limit: int
    ) -> tuple[list[JobInfo], int]:
        wanted = sorted(states) if states is not None else None
        jobs, total = await self._call(lambda: self.jobs.list(wanted, offset, limit))
        return await self._threaded(self._with_numbers, jobs), total

    async def get_job(self, job_id: str) -> JobInfo:
        _check_id(job_id)
        info = await self._call(lambda: self.jobs.get(job_id))
        return (await self._threaded(self._with_numbers, [info]))[0]

    async def create_job(self, config: CrawlConfig, seeds: list[str]) -> JobInfo:
        from trawler.api.jobspec import invalid
        from trawler.worker import seed_job

        if config.priority != "depth":  # the Redis queues are FIFOs (frontier/redis.py)
            raise invalid(("priority",), "importance order needs the embedded frontier")
        with SeedSpool() as spool:
            for url in seeds:
                spool.add(url)
            job_id = await self._call(lambda: seed_job(self.store, self.redis_url, config, spool))
        return await self.get_job(job_id)

    async def change_state(self, job_id: str, wanted: JobState) -> JobInfo:
        _check_id(job_id)
        if wanted is JobState.PAUSED:  # a revisit pass is cancelled, not paused (409)
            await self._call(lambda: check_pausable(self.store, job_id))
        await self._call(lambda: self.jobs.transition(job_id, wanted, "api"))
        return await self.get_job(job_id)

    async def recrawl_job(self, job_id: str, window: RevisitWindow) -> JobInfo:
        """A revisit pass the workers carry out (jobs/postgres_passes.py)."""
        _check_id(job_id)
        await self._call(lambda: start_pass(self.store, self.redis_url, job_id, window))
        return await self.get_job(job_id)

    def reader(self, job_id: str) -> PostgresJobReader:
        _check_id(job_id)
        return PostgresJobReader.open(self.pool, job_id, FrontierView(self.redis, job_id))

    async def check(self) -> None:
        await self._threaded(self._ping)

    async def workers(self) -> list[dict]:
        registry = WorkerRegistry(connect_redis(self.redis_url, 2))
        try:
            found = await self._call(registry.list)
        finally:
            await registry.redis.aclose()
        now = time.time()
        return [
            {"id": w.worker_id, "state": w.state, "current_url": w.current_host,
             "pages": w.pages_done, "uptime_s": w.uptime_s,
             "last_heartbeat": round(now - w.age_s, 3)}
            for w in sorted(found, key=lambda w: w.worker_id)
        ]  # fmt: skip

    # -- internals ---------------------------------------------------------------
    def _with_numbers(self, jobs: list[JobInfo]) -> list[JobInfo]:
        """Pages, errors and pace from PostgreSQL, URLs queued from Redis."""
        with self.pool.connection() as conn:
            numbers = postgres_read.job_numbers(conn, [job.id for job in jobs])
        for job in jobs:
            job.pages_crawled, job.errors, job.pages_per_s = numbers.get(job.id, (0, 0, 0.0))
            job.urls_queued = FrontierView(self.redis, job.id).queued()
        return jobs

    def _ping(self) -> None:
        with self.pool.connection() as conn:
            conn.execute("SELECT 1")
        self.redis.ping()

    @staticmethod
    async def _call(call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except DOWN as exc:
            raise StoreUnavailable(_one_line(exc)) from None

    @staticmethod
    async def _threaded(fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except DOWN as exc:
            raise StoreUnavailable(_one_line(exc)) from None


def _check_id(job_id: str) -> None:
    """PostgreSQL text holds no NUL: an id with one names no job (rather than an error)."""
    if "\x00" in job_id:
        raise UnknownJob(job_id)


async def _ping_redis(url: str) -> None:
    client = connect_redis(url, 2)
    try:
        await client.ping()
    finally:
        await client.aclose()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"cannot reach the store: {text}"
