"""FrontierView (frontier/redis_view.py) reads what RedisFrontier queued: the API's
numbers of a distributed job agree with the frontier's own."""

from __future__ import annotations

import uuid

import redis

from tests.unit.test_frontier_contract import req
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.frontier.redis_view import FrontierView
from trawler.politeness import PolitenessPolicy


async def test_view_counts_what_the_frontier_queued(redis_url: str) -> None:
    job = uuid.uuid4().hex[:12]
    options = RedisFrontierOptions(job_id=job, auto_renew=False)
    frontier = await RedisFrontier.connect(redis_url, PolitenessPolicy(), options)
    client = redis.Redis.from_url(redis_url)
    try:
        urls = [req("http://a.test/1"), req("http://a.test/2", 1), req("http://a.test/3", 2),
                req("http://b.test/1", 1)]  # fmt: skip
        await frontier.commit(await frontier.filter_new(urls), [])
        view = FrontierView(client, job)
        assert view.queued() == 4 == (await frontier.stats())[0]
        assert view.active_hosts() == 2
        assert view.host_queued(["a.test", "b.test", "c.test"]) == {
            "a.test": 3, "b.test": 1, "c.test": 0,
        }  # fmt: skip
        taken = await frontier.next()
        assert taken is not None
        assert view.queued() == 3 and sum(view.host_queued(["a.test", "b.test"]).values()) == 3
        assert FrontierView(client, "other").queued() == 0
    finally:
        client.close()
        await frontier.aclose()
