"""A distributed job's revisit pass (jobs/postgres_passes.py, store/pg_passes.py,
migration 10) on the session's redis-server and a fresh PostgreSQL database: what its
start stores, what it refuses, which job a worker then takes, and its end."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import psycopg
import pytest
from redis.asyncio import Redis

from tests.unit.test_postgres_store import CONFIG, page
from trawler.jobs.model import JobState, NotRevisitable, UnknownJob
from trawler.jobs.postgres import PostgresJobStore
from trawler.jobs.postgres_passes import end_pass, pass_of, start_pass
from trawler.outage import redis_health
from trawler.recrawl import RevisitWindow
from trawler.store.postgres import PostgresStore
from trawler.worker import _pick_job

pytestmark = pytest.mark.timeout(60)
WINDOW = RevisitWindow(10.0, 30 * 86400.0)
URLS = [f"http://a.test/{i}" for i in range(4)]


@pytest.fixture
async def store(fresh_postgres_url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        yield store


async def crawled(store: PostgresStore, state: str = "finished") -> str:
    """A job that stored four pages (one listed weekly by a sitemap) and a 404."""
    job = await store.create_job(CONFIG, "running")
    pages = [page(url, fetched_at=100.0) for url in URLS[1:]]
    pages.append(page(URLS[0], fetched_at=100.0, sitemap_changefreq="weekly"))
    pages.append(page("http://a.test/missing", status=404))
    await store.store_batch(job, pages)
    await store.set_job_state(job, state)
    return job


def rows(url: str, sql: str, job: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, (job,)).fetchall()


async def test_a_pass_makes_every_page_due_and_the_job_running(
    store: PostgresStore, redis_url: str, fresh_postgres_url: str
) -> None:
    job = await crawled(store, "cancelled")
    lane = f"trawler:{{{job}}}:r:a.test"  # left by an earlier run: emptied
    client = Redis.from_url(redis_url)
    await client.rpush(lane, b"stale")
    await client.hset(f"trawler:{{{job}}}:rpending", "k", 1)
    before = time.time()
    assert await start_pass(store, redis_url, job, WINDOW) == len(URLS)
    assert await client.exists(lane, f"trawler:{{{job}}}:rpending") == 0
    await client.aclose()
    states = rows(fresh_postgres_url, "SELECT url, next_visit_at, rate_per_s, etag"
                  " FROM revisit_state WHERE job_id = %s", job)  # fmt: skip
    assert sorted(url for url, *_ in states) == URLS  # 2xx pages only
    assert all(before <= due <= time.time() and etag is None for _, due, _r, etag in states)
    rates = {url: rate for url, _due, rate, _etag in states}
    assert rates[URLS[0]] == pytest.approx(1 / (7 * 86400))  # its <changefreq>
    versions = rows(fresh_postgres_url, "SELECT count(*) FROM page_versions WHERE job_id = %s",
                    job)  # fmt: skip
    assert versions == [(len(URLS),)]
    info = await PostgresJobStore(store).get(job)
    assert info.state is JobState.RUNNING and info.finished_at is None
    assert info.events[-1].reason == "recrawl"
    found = await pass_of(store, job)
    assert found is not None and found.back_to == "cancelled" and found.window == WINDOW
    with pytest.raises(NotRevisitable, match="is running"):
        await start_pass(store, redis_url, job, WINDOW)


async def test_refusals(store: PostgresStore, redis_url: str) -> None:
    with pytest.raises(UnknownJob):
        await start_pass(store, redis_url, "nope", WINDOW)
    running = await crawled(store, "running")
    with pytest.raises(NotRevisitable, match="needs a finished or cancelled job"):
        await start_pass(store, redis_url, running, WINDOW)
    empty = await store.create_job(CONFIG, "finished")
    with pytest.raises(NotRevisitable, match="stored no page"):
        await start_pass(store, redis_url, empty, WINDOW)
    assert (await store.get_job(empty))[1] == "finished"  # nothing recorded
    assert await pass_of(store, empty) is None


async def test_a_worker_takes_a_job_in_a_pass_and_its_end_puts_it_back(
    store: PostgresStore, redis_url: str
) -> None:
    """Nothing queued in Redis: a job in a pass is still picked (not finished), before
    a continuous job; once ended, it is finished again and nobody picks it."""
    await store.create_job(CONFIG.model_copy(update={"recrawl": True}), "running")
    job = await crawled(store)
    await start_pass(store, redis_url, job, WINDOW)
    picked = await _pick_job(store, redis_url, redis_health(redis_url))
    assert picked is not None and picked[0] == job
    assert (await store.get_job(job))[1] == "running"
    assert await end_pass(store, job)
    info = await PostgresJobStore(store).get(job)
    assert info.state is JobState.FINISHED and info.events[-1].reason == "recrawl done"
    assert not await end_pass(store, job)  # a second worker's end changes nothing
    picked = await _pick_job(store, redis_url, redis_health(redis_url))
    assert picked is not None and picked[0] != job


async def test_a_cancel_ends_a_pass_and_a_resume_after_a_pause_carries_it_on(
    store: PostgresStore, redis_url: str
) -> None:
    jobs, health = PostgresJobStore(store), redis_health(redis_url)
    paused, cancelled = await crawled(store), await crawled(store)
    for job in (paused, cancelled):
        await start_pass(store, redis_url, job, WINDOW)
    await jobs.transition(paused, JobState.PAUSED, "user")  # `trawler jobs pause`
    await jobs.transition(cancelled, JobState.CANCELLED, "user")
    assert await _pick_job(store, redis_url, health) is None
    assert not await end_pass(store, cancelled)  # a worker leaving it changes nothing
    assert (await jobs.get(cancelled)).state is JobState.CANCELLED
    await jobs.transition(paused, JobState.RUNNING, "user")
    picked = await _pick_job(store, redis_url, health)
    assert picked is not None and picked[0] == paused  # the pass goes on
    assert await end_pass(store, paused)
    assert (await jobs.get(paused)).state is JobState.FINISHED
