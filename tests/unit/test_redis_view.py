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
    # Hosts of this test's own: host state in Redis is shared by every job, and the URL
    # leased below holds its host (a.test held by it made test_redis_revisits.py wait).
    a, b, c = (f"{name}-{job}.test" for name in "abc")
    try:
        urls = [req(f"http://{a}/1"), req(f"http://{a}/2", 1), req(f"http://{a}/3", 2),
                req(f"http://{b}/1", 1)]  # fmt: skip
        await frontier.commit(await frontier.filter_new(urls), [])
        view = FrontierView(client, job)
        assert view.queued() == 4 == (await frontier.stats())[0]
        assert view.active_hosts() == 2
        assert view.host_queued([a, b, c]) == {a: 3, b: 1, c: 0}
        taken = await frontier.next()
        assert taken is not None
        assert view.queued() == 3 and sum(view.host_queued([a, b]).values()) == 3
        assert FrontierView(client, "other").queued() == 0
    finally:
        client.close()
        await frontier.aclose()
