"""--max-pages-per-host's refusals in the distributed frontier (redis_budget.py):
each URL refused once, over all workers and whatever retries, on a real
redis-server (the session's, tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(60)


def req(path: str) -> CrawlRequest:
    url = f"http://a.test{path}"
    return CrawlRequest(url, 1, None, host_key(url), url_fingerprint(url))


@pytest.fixture
async def workers(redis_url: str) -> AsyncIterator[Callable[[], Any]]:
    job, made = uuid.uuid4().hex[:12], []

    async def make() -> RedisFrontier:
        options = RedisFrontierOptions(job_id=job, worker_id=f"w{len(made)}",
                                       auto_renew=False, max_pages_per_host=2)  # fmt: skip
        made.append(await RedisFrontier.connect(redis_url, PolitenessPolicy(0.0), options))
        return made[-1]

    yield make
    for frontier in made:
        await frontier.aclose()


async def test_each_refused_url_counts_once(workers: Callable[[], Any]) -> None:
    one, two = await workers(), await workers()
    first = [req("/1"), req("/2"), req("/3")]
    await one.commit(first, [])
    await one.commit(first, [])  # a retry after an unknown outcome: nothing more
    assert one.budget_refusals == 1  # /3: the host's 2 are /1 and /2
    await two.commit([req("/3"), req("/4")], [])  # /3 already refused: seen
    assert two.budget_refusals == 1
    assert await two.host_budget_refused() == 2
    # Refused, a URL is seen: found again, it is not new, nor counted again.
    assert await two.filter_new([req("/3"), req("/4"), req("/5")]) == [req("/5")]
