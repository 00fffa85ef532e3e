"""The frontier contract over host buckets (redis_keys.py): on one Redis with the
cluster's bucketed layout, and on a real 3-master Redis Cluster on loopback
(tests/redis_cluster.py), where every script call must stay in one slot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.redis_cluster import LocalCluster, start_cluster
from tests.servers import RedisServer, ServerUnavailable, unavailable
from tests.unit import test_frontier_contract as contract
from tests.unit.test_redis_revisits import revisit
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.frontier.redis_conn import connect_redis
from trawler.frontier.redis_keys import CLUSTER_BUCKETS, KeySpace
from trawler.frontier.redis_revisits import reset_lanes
from trawler.outage import redis_health
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest

pytestmark = pytest.mark.timeout(90)
req = contract.req
own_redis = contract.own_redis  # the fixture: a private redis-server per test
_redis = contract.TestRedisFrontier  # tests borrowed by the cluster's contract


class TestBucketedRedisFrontier(contract.TestRedisFrontier):
    """Every Redis frontier test again, on one Redis with 16 host buckets."""

    @pytest.fixture
    async def make(self, own_redis: RedisServer) -> AsyncIterator:
        frontiers: list[RedisFrontier] = []

        async def make(delay_s: float = 0.0, outage_safe: bool = False, **options):  # type: ignore[no-untyped-def]
            options = {"job_id": "job1", "worker_id": f"w{len(frontiers)}", **options}
            options.setdefault("buckets", CLUSTER_BUCKETS)
            health = redis_health(own_redis.url) if outage_safe else None
            frontier = await RedisFrontier.connect(
                own_redis.url, PolitenessPolicy(delay_s), RedisFrontierOptions(**options), health
            )
            frontiers.append(frontier)
            return contract.RedisHarness(frontier)

        yield make
        for frontier in frontiers:
            await frontier.aclose()

    async def test_calls_wait_through_a_redis_outage(
        self, make, own_redis: RedisServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """As on one bucket, but which host comes first is the bucket sweep's choice."""
        h = await make(outage_safe=True)
        await h.add([req("http://a.test/1")])
        own_redis.stop()
        caplog.set_level(logging.WARNING, logger="trawler")
        waiting = [asyncio.create_task(h.add([req(f"http://b.test/{i}")])) for i in range(5)]
        taken = asyncio.create_task(h.frontier.next())
        await asyncio.sleep(2.0)
        assert not any(task.done() for task in [*waiting, taken])
        await asyncio.to_thread(own_redis.start)
        assert await asyncio.wait_for(asyncio.gather(*waiting), 10) == [1] * 5
        url = (await asyncio.wait_for(taken, 10)).url
        assert url == "http://a.test/1" or url.startswith("http://b.test/")
        lines = [r.getMessage() for r in caplog.records]
        assert [line.split(" at ")[0] for line in lines if "lost" in line] == ["lost Redis"]

    async def test_commands_per_url(self, make, own_redis: RedisServer) -> None:
        """As on one bucket (3.3 round trips, ~25 commands a URL there), plus the
        NEXT calls on buckets with nothing ready, each reclaiming its expired leases."""
        h = await make()
        urls = [req(f"http://h{i % 10}.test/{i}") for i in range(1000)]
        client = connect_redis(own_redis.url)
        await client.config_resetstat()
        for i in range(0, 1000, 50):
            await h.add(urls[i : i + 50])
        batch = []
        for _ in urls:
            batch.append(await h.take())
            if len(batch) == 100:
                await h.commit([], batch)
                batch = []
        stats = await client.info("commandstats")
        await client.aclose()
        calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}
        calls.pop("config|resetstat", None)
        scripts = calls.get("evalsha", 0) + calls.get("eval", 0)
        inner = sum(calls.values()) - scripts
        print(f"\nper URL: {scripts / 1000:.2f} round trips, {inner / 1000:.1f} commands")
        assert scripts / 1000 <= 3.5 and inner / 1000 <= 40

    async def test_hosts_spread_over_the_buckets(self, make) -> None:
        h = await make()
        await h.add([req(f"http://h{i}.test/") for i in range(64)])
        keys = KeySpace("trawler", "job1", CLUSTER_BUCKETS)
        sizes = [await h.frontier.redis.zcard(keys.job_prefix(b) + "ready") for b in range(16)]
        assert sum(sizes) == 64 and sum(1 for n in sizes if n) >= 12, sizes
        assert await h.frontier.redis.exists("trawler:{job1}:ready") == 0  # no job-wide queue


async def nothing_within(
    pending: Coroutine[Any, Any, CrawlRequest | None], wait_s: float = 1.0
) -> bool:
    """next() hands nothing out within ``wait_s`` (it waits, neither a URL nor done)."""
    try:
        await asyncio.wait_for(pending, wait_s)
    except TimeoutError:
        return True
    return False


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    try:
        cluster = start_cluster(tmp_path / "cluster")
    except (ServerUnavailable, RuntimeError) as exc:
        unavailable("Redis Cluster", exc)
    yield cluster
    cluster.stop()


class TestClusterFrontier(contract.FrontierContract):
    @pytest.fixture
    async def make(self, own_cluster: LocalCluster) -> AsyncIterator:
        frontiers: list[RedisFrontier] = []

        async def make(delay_s: float = 0.0, outage_safe: bool = False, **options):  # type: ignore[no-untyped-def]
            options = {"job_id": "job1", "worker_id": f"w{len(frontiers)}", **options}
            health = redis_health(own_cluster.url) if outage_safe else None
            frontier = await RedisFrontier.connect(
                own_cluster.url, PolitenessPolicy(delay_s), RedisFrontierOptions(**options), health
            )
            frontiers.append(frontier)
            return contract.RedisHarness(frontier)

        yield make
        for frontier in frontiers:
            await frontier.aclose()

    test_commit_is_idempotent = _redis.test_commit_is_idempotent
    test_two_workers_share_hosts_politely = _redis.test_two_workers_share_hosts_politely
    test_expired_lease_goes_to_another_worker = _redis.test_expired_lease_goes_to_another_worker
    test_host_politeness_is_shared_across_jobs = _redis.test_host_politeness_is_shared_across_jobs
    test_robots_answers_are_shared_by_profile_and_errors_within_the_job = (
        _redis.test_robots_answers_are_shared_by_profile_and_errors_within_the_job
    )

    async def test_keys_are_on_every_master(self, make, own_cluster: LocalCluster) -> None:
        h = await make()
        await h.add([req(f"http://h{i}.test/") for i in range(64)])
        counts = [int(own_cluster.cli(n, "dbsize")) for n in own_cluster.nodes]
        assert min(counts) > 0, counts  # no shard left out: the buckets spread

    async def test_max_pages_holds_over_the_buckets(self, make) -> None:
        """--max-pages on a cluster (redis_reserve.py): places reserved in the job's own
        slot, given back by a hand-back, kept by a commit until its page is counted;
        two workers never lease more URLs than the budget has room for."""
        one, two = await make(max_pages=3), await make(max_pages=3)
        await one.add([req(f"http://h{i}.test/") for i in range(12)])
        taken = [await one.frontier.next(), await two.frontier.next(), await one.frontier.next()]
        assert all(taken) and len({r.host for r in taken if r}) == 3
        assert await nothing_within(two.frontier.next())  # the 3 places are taken
        first, second, third = cast(list[CrawlRequest], taken)
        await one.frontier.hand_back(third)  # a place free again
        again = await two.frontier.next()
        assert again is not None
        assert await nothing_within(one.frontier.next())
        await one.frontier.commit([], [first], pages_stored=1)
        await two.frontier.commit([], [second, again], pages_stored=3)
        assert await asyncio.wait_for(one.frontier.next(), 5) is None  # budget spent: done
        keys = KeySpace("trawler", "job1", CLUSTER_BUCKETS)
        assert await one.frontier.redis.zcard(keys.job_wide_prefix() + "budget:lease_exp") == 0

    async def test_revisit_lanes_in_every_bucket_and_their_reset(self, make) -> None:
        """Revisits on a cluster (redis_revisits.py): a poll's pages go to their hosts'
        buckets, pending is summed over them, and a pass's reset (`trawler recrawl
        --redis`) empties every bucket's lanes."""
        h = await make()
        frontier = h.frontier
        frontier.set_revisit_mode(True, True)
        poll, pending = await frontier.revisits.begin_poll(5.0)
        assert poll > 0 and pending == 0
        pages = [revisit(f"http://h{i}.test/p") for i in range(8)]
        assert await frontier.revisits.add(poll, pages) == []
        assert (await frontier.revisits.begin_poll(5.0))[1] == 8
        visited = await asyncio.wait_for(frontier.next(), 5)
        assert visited is not None and visited.revisit is not None
        await frontier.revisits.done([visited])
        assert (await frontier.revisits.begin_poll(5.0))[1] == 7
        await reset_lanes(frontier.redis, "job1")
        assert (await frontier.revisits.begin_poll(5.0))[1] == 0
        assert await nothing_within(frontier.next())

    async def test_survives_a_shard_restart(self, make, own_cluster: LocalCluster) -> None:
        h = await make(outage_safe=True)
        urls = [req(f"http://h{i % 9}.test/{i}") for i in range(45)]
        await h.add(urls)
        done = [await h.take() for _ in range(5)]
        await h.commit([], done)
        for node in own_cluster.nodes:  # kill -9 loses nothing
            own_cluster.cli(node, "config", "set", "appendfsync", "always")
        shard = own_cluster.nodes[1]
        await asyncio.to_thread(shard.restart, kill=True)
        started = time.monotonic()
        rest = await h.drain()
        handed = Counter(r.url for r in [*done, *rest])
        assert len(handed) == 45 and set(handed.values()) == {1}
        assert time.monotonic() - started < 60
