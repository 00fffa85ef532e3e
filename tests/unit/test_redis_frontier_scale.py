"""The distributed frontier at scale: bounded work per script call, compact queue
entries, and a worker that waits out a busy or slow Redis instead of exiting.

Each test runs a private redis-server (tests/servers.py) and reads what Redis
itself reports: ``INFO commandstats`` call counts, ``MEMORY USAGE``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.servers import RedisServer, ServerUnavailable, start_redis, unavailable
from trawler.dedup import url_fingerprint
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.frontier.redis_codec import SCRIPT_CHUNK, decode_request, encode_request
from trawler.outage import redis_health
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(90)


def req(url: str, depth: int = 0, parent: str | None = None) -> CrawlRequest:
    return CrawlRequest(url, depth, parent, host_key(url), url_fingerprint(url))


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    try:
        server = start_redis(tmp_path / "redis")
    except ServerUnavailable as exc:
        unavailable("redis-server", exc)
    yield server
    server.kill()


@pytest.fixture
async def make(own_redis: RedisServer) -> AsyncIterator[Callable[..., Any]]:
    frontiers: list[RedisFrontier] = []

    async def make(outage_safe: bool = True, **options: Any) -> RedisFrontier:
        options = {"job_id": "job1", "worker_id": f"w{len(frontiers)}", **options}
        health = redis_health(own_redis.url) if outage_safe else None
        frontier = await RedisFrontier.connect(
            own_redis.url, PolitenessPolicy(0.0), RedisFrontierOptions(**options), health
        )
        frontiers.append(frontier)
        return frontier

    yield make
    for frontier in frontiers:
        await frontier.aclose()


async def script_calls(client: Redis) -> int:
    """Script runs since CONFIG RESETSTAT (not an EVALSHA answered NOSCRIPT)."""
    stats = await client.info("commandstats")
    runs = 0
    for name in ("evalsha", "eval"):
        counts = stats.get(f"cmdstat_{name}", {})
        runs += counts.get("calls", 0) - counts.get("failed_calls", 0)
    return runs


async def busy_script(url: str, seconds: float) -> None:
    """Keep Redis inside one Lua script for ``seconds`` (from the test's own client)."""
    client = Redis.from_url(url, socket_timeout=seconds + 30)
    busy = """
    local t = redis.call('TIME')
    local stop = tonumber(t[1]) * 1e6 + tonumber(t[2]) + tonumber(ARGV[1])
    repeat t = redis.call('TIME') until tonumber(t[1]) * 1e6 + tonumber(t[2]) >= stop
    return 1
    """
    try:
        await client.eval(busy, 0, round(seconds * 1e6))
    finally:
        await client.aclose()


# -- bounded work per call --------------------------------------------------------------
async def test_a_huge_batch_is_split_into_bounded_script_calls(make, own_redis) -> None:
    """25,000 URLs: filter_new and commit each make ceil(25,000 / chunk) script calls,
    so no single call blocks Redis for the whole batch (1 M seeds took 5-14 s in one)."""
    frontier = await make()
    urls = [req(f"http://h{i % 500}.test/p/{i}") for i in range(25_000)]
    client = Redis.from_url(own_redis.url)
    await client.config_resetstat()
    fresh = await frontier.filter_new(urls)
    after_filter = await script_calls(client)
    await frontier.commit(fresh, [])
    after_commit = await script_calls(client)
    await client.aclose()
    chunks = -(-len(urls) // SCRIPT_CHUNK)
    assert SCRIPT_CHUNK <= 10_000 and chunks >= 3
    assert (after_filter, after_commit - after_filter) == (chunks, chunks)
    assert len(fresh) == 25_000 and (await frontier.stats())[0] == 25_000
    assert await frontier.filter_new(urls) == []


# -- compact entries ----------------------------------------------------------------
async def test_a_queued_url_costs_less_than_100_bytes_of_redis(make, own_redis) -> None:
    """Queue keys (MEMORY USAGE, exact) over 20,000 URLs, 100 per host: ≤ 100 B a URL
    (JSON members in per-host ZSETs cost 256-320 B)."""
    frontier = await make()
    urls = [
        req(f"http://host{i % 200}.example.com/section/page-{i}.html", 1,
            f"http://host{i % 200}.example.com/section/")
        for i in range(20_000)
    ]  # fmt: skip
    await frontier.commit(await frontier.filter_new(urls), [])
    client = Redis.from_url(own_redis.url)
    total, keys = 0, 0
    async for key in client.scan_iter(match="trawler:{job1}:*", count=1000):
        if b":seen:" in key or key.endswith((b":queued", b":clock", b":ready")):
            continue
        total += await client.memory_usage(key, samples=0) or 0
        keys += 1
    await client.aclose()
    per_url = total / len(urls)
    print(f"\nqueue: {per_url:.1f} B per queued URL over {keys} keys")
    assert keys >= 200 and per_url <= 100


def test_entries_round_trip_every_field() -> None:
    plain = req("http://a.test/x?q=1", 3, "http://a.test/")
    secure = req("https://a.test:8443/é", 0, None)
    sitemap = "http://b.test/s.xml"
    other = CrawlRequest(sitemap, 2, "http://c.test/robots.txt", "b.test",
                         url_fingerprint(sitemap), 4, "sitemap", "2024-01-02\n")  # fmt: skip
    odd_host = CrawlRequest("http://A.test/", 1, None, "a.test", 7)  # url not under its host key
    for r in (plain, secure, other, odd_host):
        payload = encode_request(r)
        assert decode_request(payload, r.host, r.depth) == r
    assert len(encode_request(plain)) < len(plain.url) + 16


def test_old_json_entries_still_decode() -> None:
    """A job queued by an older Trawler (JSON members) is read after an upgrade."""
    r = req("http://a.test/old", 2, "http://a.test/")
    old = json.dumps([str(r.fp), r.depth, r.host, r.url, r.parent_url, 0, "page", None])
    assert decode_request(old.encode(), "ignored", 9) == r


async def test_a_job_queued_by_an_older_version_is_crawled_after_the_upgrade(
    make, own_redis
) -> None:
    """Old layout: ZSET q:<host> of JSON members, a ready ZSET, the queued counter."""
    client = Redis.from_url(own_redis.url)
    old = [req("http://a.test/1", 0), req("http://a.test/2", 1), req("http://b.test/1", 0)]
    for i, r in enumerate(old):
        member = json.dumps([str(r.fp), r.depth, r.host, r.url, None, 0, "page", None])
        await client.zadd(f"trawler:{{job1}}:q:{r.host}", {member: r.depth * 1e12 + i})
        await client.zadd("trawler:{job1}:ready", {r.host: 0}, nx=True)
    await client.set("trawler:{job1}:queued", 3)
    await client.aclose()
    frontier = await make()
    await frontier.commit([req("http://a.test/new", 0)], [])
    handed = []
    while (r := await asyncio.wait_for(frontier.next(), 5)) is not None:
        await frontier.finish_host(r.host)
        await frontier.commit([], [r])
        handed.append(r.url)
    assert sorted(handed) == sorted([*(r.url for r in old), "http://a.test/new"])


# -- a busy or slow Redis -----------------------------------------------------------
async def test_busy_redis_is_waited_out(make, own_redis) -> None:
    """Another client's long script makes Redis answer BUSY: the worker's calls back
    off and go on once it ends (BUSY was an error that made workers exit)."""
    frontier = await make()
    client = Redis.from_url(own_redis.url)
    await client.config_set("busy-reply-threshold", 100)
    await client.aclose()
    busy = asyncio.create_task(busy_script(own_redis.url, 1.5))
    await asyncio.sleep(0.4)  # past the threshold: Redis answers BUSY
    started = time.monotonic()
    assert await frontier.filter_new([req("http://a.test/1")]) != []
    await frontier.commit([req("http://a.test/1")], [])
    taken = await asyncio.wait_for(frontier.next(), 10)
    assert taken is not None and taken.url == "http://a.test/1"
    assert time.monotonic() - started >= 0.5  # it did wait for the busy script
    await busy
    assert frontier.health is not None and frontier.health.up


async def test_a_call_slower_than_5s_is_waited_for_not_sent_again(make, own_redis) -> None:
    """Redis stuck 6 s in one script (no BUSY answers): a call is waited for, not
    timed out after 5 s and re-sent (a re-sent script is run twice)."""
    frontier = await make()
    client = Redis.from_url(own_redis.url)
    await client.config_set("busy-reply-threshold", 0)  # never answer BUSY
    await client.config_resetstat()
    busy = asyncio.create_task(busy_script(own_redis.url, 6.0))
    await asyncio.sleep(0.3)
    assert await frontier.filter_new([req("http://a.test/1")]) != []
    await busy
    calls = await script_calls(client)
    await client.aclose()
    assert calls == 2  # the busy script and one SEEN, not SEEN twice


async def test_a_late_acknowledgement_takes_the_requeued_url_out(make) -> None:
    """A worker's lease expired and its URL went back to the queue; its page is stored
    after all: the acknowledgement removes the queued copy, so it is not fetched twice."""
    slow = await make(lease_timeout_s=0.5, auto_renew=False)
    other, holder = await make(), await make()
    url = req("http://a.test/1")
    await slow.commit([url], [])
    taken = await slow.next()
    assert taken is not None
    await asyncio.sleep(0.8)  # the lease expires
    await holder.acquire_host("a.test")  # keeps the requeued URL from being handed out
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(other.next(), 0.5)  # reclaims: the URL is queued again
    assert (await other.stats())[0] == 1
    await slow.commit([], [taken])
    await holder.finish_host("a.test")
    assert (await other.stats())[0] == 0
    assert await asyncio.wait_for(other.next(), 5) is None


async def test_a_url_handed_out_again_is_acknowledged_once(make) -> None:
    slow = await make(lease_timeout_s=0.5, auto_renew=False)
    other = await make()
    await slow.commit([req("http://a.test/1"), req("http://a.test/2")], [])
    taken = await slow.next()
    assert taken is not None
    await asyncio.sleep(0.8)
    again = await asyncio.wait_for(other.next(), 5)
    assert again is not None and again.url == taken.url
    await slow.commit([], [taken])  # late: the queue no longer holds it
    await other.finish_host(again.host)
    await other.commit([], [again])
    rest = await asyncio.wait_for(other.next(), 5)
    assert rest is not None and rest.url == "http://a.test/2"
    await other.finish_host(rest.host)
    await other.commit([], [rest])
    assert await asyncio.wait_for(other.next(), 5) is None


# -- the seen set ---------------------------------------------------------------------
async def test_the_seen_set_splits_its_buckets_and_stays_exact(make, own_redis) -> None:
    """Buckets from 2**4 up (2**16 in a real job): 40,000 URLs split them a few
    rounds, each stays packed (listpack, ≤ 128 fields), ≤ 20 B a URL, and every
    URL is found again while fresh ones are not (a fixed 16-bit bucket count
    packs only 8.4 M URLs; beyond, ~51 B a URL)."""
    frontier = await make(seen_base_bits=4)
    urls = [req(f"http://h{i % 50}.test/{i}") for i in range(40_000)]
    for i in range(0, len(urls), 4000):
        assert len(await frontier.filter_new(urls[i : i + 4000])) == 4000
        await frontier.commit(urls[i : i + 4000], [])
    assert await frontier.filter_new(urls) == []
    fresh = [req(f"http://h{i % 50}.test/new{i}") for i in range(5000)]
    assert len(await frontier.filter_new(fresh)) == 5000
    client = Redis.from_url(own_redis.url)
    keys = [k async for k in client.scan_iter(match="trawler:{job1}:seen:*", count=1000)]
    sizes = [await client.hlen(k) for k in keys]
    encodings = {await client.object("encoding", k) for k in keys}
    total = sum([await client.memory_usage(k, samples=0) or 0 for k in keys])
    meta = await client.hgetall("trawler:{job1}:seenmeta")
    await client.aclose()
    assert sum(sizes) == 40_000 == await frontier.urls_seen()
    assert len(keys) > 2**4 * 16 and max(sizes) <= 128 and encodings == {b"listpack"}
    assert int(meta[b"count"]) == 40_000 and int(meta[b"level"]) >= 4
    print(f"\nseen: {total / 40_000:.1f} B a URL in {len(keys)} buckets, {meta}")
    assert total / 40_000 <= 20
