"""Which job a worker takes (worker._pick_job) on the session's redis-server and a
fresh PostgreSQL database: a job with URLs first, a continuous one (--recrawl) when
no other has work, and a continuous job never finished for an empty queue."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.outage import redis_health
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.store.postgres import PostgresStore
from trawler.worker import _pick_job

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def store(fresh_postgres_url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        yield store


async def queue_one_url(redis_url: str, job_id: str) -> None:
    options = RedisFrontierOptions(job_id=job_id, auto_renew=False)
    frontier = await RedisFrontier.connect(redis_url, PolitenessPolicy(), options)
    url = "http://a.test/"
    await frontier.commit([CrawlRequest(url, 0, None, "a.test", url_fingerprint(url))], [])
    await frontier.aclose()


async def test_a_job_with_urls_comes_before_a_continuous_one(
    store: PostgresStore, redis_url: str
) -> None:
    health = redis_health(redis_url)
    continuous = await store.create_job(CrawlConfig(recrawl=True), "running")  # the oldest
    done = await store.create_job(CrawlConfig(), "running")
    newer = await store.create_job(CrawlConfig(), "running")
    await queue_one_url(redis_url, newer)
    picked = await _pick_job(store, redis_url, health)
    assert picked is not None and picked[0] == newer
    assert (await store.get_job(done))[1] == "finished"  # nothing queued, nothing leased
    await store.set_job_state(newer, "cancelled")
    picked = await _pick_job(store, redis_url, health)
    assert picked is not None and picked[0] == continuous and picked[1].recrawl
    assert (await store.get_job(continuous))[1] == "running"  # its pages come due again
