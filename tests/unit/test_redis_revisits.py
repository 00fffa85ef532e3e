"""Revisit lanes in the Redis frontier (frontier/redis_revisits.py) on the session's
redis-server: the turn rule beside new URLs, one lane entry per page while it is
pending, polls refused or filtered by what was committed meanwhile, and a dead
worker's revisit dropped (its page is fed again from PostgreSQL), never re-queued."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.frontier.redis_keys import CLUSTER_BUCKETS
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.recrawl_lanes import REVISIT, revisit_request
from trawler.store.versions import RevisitState
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(60)

Make = Callable[..., Awaitable[RedisFrontier]]


def new_url(url: str) -> CrawlRequest:
    return CrawlRequest(url, 1, None, host_key(url), url_fingerprint(url))


def revisit(url: str, due: float = 1000.0) -> CrawlRequest:
    state = RevisitState(url, host_key(url), url, '"e1"', None, "ab" * 32, None, 1, 900.0,
                         900.0, due, 1e-4)  # fmt: skip
    return revisit_request(state, 2)


@pytest.fixture(params=[1, CLUSTER_BUCKETS], ids=["one-bucket", "buckets"])
async def make(redis_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    """make(worker, **options): a worker's frontier on one job of its own (a fresh id);
    on the single-Redis layout and on a cluster's host buckets (lanes per bucket, the
    feeder's turn in the job's own keys: redis_revisits.py)."""
    job = uuid.uuid4().hex
    frontiers: list[RedisFrontier] = []

    async def make(worker: str = "w0", **options: float) -> RedisFrontier:
        opts = RedisFrontierOptions(job_id=job, worker_id=worker, buckets=request.param,
                                    **options)  # type: ignore[arg-type]  # fmt: skip
        frontier = await RedisFrontier.connect(redis_url, PolitenessPolicy(0.0), opts)
        frontier.set_revisit_mode(True, True)
        frontiers.append(frontier)
        return frontier

    yield make
    for frontier in frontiers:
        await frontier.aclose()


async def feed(frontier: RedisFrontier, requests: list[CrawlRequest]) -> list[CrawlRequest]:
    poll, _pending = await frontier.revisits.begin_poll(1.0)
    assert poll > 0
    return await frontier.revisits.add(poll, requests)


async def nothing_ready(frontier: RedisFrontier, wait_s: float = 1.0) -> bool:
    """next() hands nothing out within ``wait_s`` (a continuous job's waits, never ends)."""
    try:
        await asyncio.wait_for(frontier.next(), wait_s)
    except TimeoutError:
        return True
    return False


async def take(frontier: RedisFrontier) -> CrawlRequest:
    request = await asyncio.wait_for(frontier.next(), 5)
    assert request is not None
    frontier.record_sent(request.host, time.monotonic())
    await frontier.finish_host(request.host)
    return request


async def test_a_host_with_new_urls_gives_revisits_every_other_turn(make: Make) -> None:
    """recrawl_lanes.py's rule in NEXT: revisit, new, revisit, new ..., then revisits
    every turn once the host has no new URL; each revisit carries its page's state."""
    frontier = await make()
    news = [new_url(f"http://a.test/new-{i}") for i in range(3)]
    await frontier.commit(await frontier.filter_new(news), [])
    assert await feed(frontier, [revisit(f"http://a.test/old-{i}") for i in range(4)]) == []
    kinds = []
    for _ in range(7):
        request = await take(frontier)
        kinds.append(request.kind)
        if request.kind == REVISIT:
            assert request.revisit.etag == '"e1"' and request.depth == 2  # type: ignore[union-attr]
            await frontier.revisits.done([request])
        else:
            await frontier.commit([], [request])
    assert kinds == [REVISIT, "page", REVISIT, "page", REVISIT, "page", REVISIT]


async def test_a_page_is_queued_once_while_pending(make: Make) -> None:
    """Fed again (a later poll, a claim expired) while queued or leased: not queued
    twice; once its visit is committed, a later poll may queue it again."""
    frontier = await make()
    page = revisit("http://a.test/p")
    await feed(frontier, [page])
    await feed(frontier, [page])
    leased = await take(frontier)
    await feed(frontier, [page])  # leased now
    assert await nothing_ready(frontier)
    await frontier.revisits.done([leased])
    await feed(frontier, [revisit("http://a.test/p", due=2000.0)])
    assert (await take(frontier)).revisit.next_visit_at == 2000.0  # type: ignore[union-attr]


async def test_a_poll_skips_visits_committed_since_it_began(make: Make) -> None:
    """A poll that read PostgreSQL before a visit's commit must not queue that page
    again (it would be visited twice for one due time); an older poll is refused."""
    frontier = await make()
    page = revisit("http://a.test/p")
    await feed(frontier, [page])
    leased = await take(frontier)
    stale_poll, _ = await frontier.revisits.begin_poll(5.0)  # reads the page, still due
    await frontier.revisits.done([leased])  # its visit is committed meanwhile
    assert await frontier.revisits.add(stale_poll, [page]) == []  # skipped, not refused
    older = stale_poll
    newer, _ = await frontier.revisits.begin_poll(5.0)
    assert await frontier.revisits.add(older, [revisit("http://b.test/q")]) != []  # refused
    assert await frontier.revisits.add(newer, [revisit("http://b.test/q")]) == []
    assert (await take(frontier)).url == "http://b.test/q"
    assert await nothing_ready(frontier)


async def test_one_feeder_at_a_time(make: Make) -> None:
    first, second = await make("w0"), await make("w1")
    poll, _ = await first.revisits.begin_poll(5.0)
    assert poll > 0
    assert (await second.revisits.begin_poll(5.0))[0] == 0
    assert (await first.revisits.begin_poll(5.0))[0] == poll + 1  # its turn, renewed


async def test_a_dead_workers_revisit_is_dropped_not_queued_again(make: Make) -> None:
    """Its lease expires: the page leaves Redis (rpending too), so the next feed, from
    PostgreSQL where the page is still due unless its visit was committed, queues it."""
    dead = await make("dead", lease_timeout_s=1.0, auto_renew=False)
    alive = await make("alive", lease_timeout_s=1.0)
    await feed(dead, [revisit("http://a.test/p")])
    await take(dead)  # then killed: no commit, no renewal
    await asyncio.sleep(1.2)
    assert await nothing_ready(alive)  # not queued again
    assert await feed(alive, [revisit("http://a.test/p")]) == []
    assert (await take(alive)).url == "http://a.test/p"


async def test_a_revisit_handed_back_is_first_in_its_lane(make: Make) -> None:
    frontier = await make()
    await feed(frontier, [revisit("http://a.test/1"), revisit("http://a.test/2")])
    first = await asyncio.wait_for(frontier.next(), 5)
    assert first is not None and first.url == "http://a.test/1"
    await frontier.hand_back(first)
    await frontier.finish_host(first.host)
    assert (await take(frontier)).url == "http://a.test/1"
    assert (await frontier.stats())[0] == 0  # revisits are not counted as queued URLs


async def test_a_stalled_workers_commit_takes_back_the_copy_fed_again(make: Make) -> None:
    """A worker stalls past its lease: the page is fed again (still due in PostgreSQL
    then) while the worker goes on to commit its visit. Its acknowledgement takes the
    queued copy out, else the page would be visited twice for one due time."""
    stalled = await make("stalled", lease_timeout_s=1.0, auto_renew=False)
    other = await make("other", lease_timeout_s=1.0)
    page = revisit("http://a.test/p")
    await feed(stalled, [page])
    leased = await take(stalled)
    await asyncio.sleep(1.2)
    assert await nothing_ready(other, 0.3)  # its NEXT found the lease expired
    await asyncio.sleep(1.0)  # the stalled worker's feeder turn is over
    assert await feed(other, [revisit("http://a.test/p")]) == []
    await stalled.revisits.done([leased])  # its visit was committed after all
    assert await nothing_ready(other)
