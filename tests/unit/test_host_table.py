"""Two embedded frontiers (two jobs) on one host table: one lease of a host at a time
in the process, and each job's interval counted from the other job's request."""

from __future__ import annotations

import asyncio
import time

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.hosts import HostTable
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(30)


def req(url: str) -> CrawlRequest:
    return CrawlRequest(url, 0, None, host_key(url), url_fingerprint(url))


def two_jobs(delay_a: float, delay_b: float, shared: bool = True) -> tuple[SqliteFrontier, ...]:
    table = HostTable()
    return tuple(
        SqliteFrontier(PolitenessPolicy(delay_s=delay), hosts=table if shared else None)
        for delay in (delay_a, delay_b)
    )


async def test_a_host_held_by_one_job_is_not_leased_by_the_other() -> None:
    a, b = two_jobs(0.0, 0.0)
    a.enqueue([req("http://h.test/1")])
    b.enqueue([req("http://h.test/2"), req("http://k.test/3")])
    assert (await a.next()).host == "h.test"  # type: ignore[union-attr]
    assert (await b.next()).host == "k.test"  # type: ignore[union-attr]
    waiting = asyncio.create_task(b.next())
    await asyncio.sleep(0.1)
    assert not waiting.done()  # h.test is held by a
    await a.finish_host("h.test")
    leased = await asyncio.wait_for(waiting, 1.0)
    assert leased is not None and leased.url == "http://h.test/2"


async def test_without_a_shared_table_both_lease_it() -> None:
    """The check above can fail: frontiers of their own know nothing of each other."""
    a, b = two_jobs(0.0, 0.0, shared=False)
    a.enqueue([req("http://h.test/1")])
    b.enqueue([req("http://h.test/2")])
    assert (await a.next()).host == (await b.next()).host == "h.test"  # type: ignore[union-attr]


async def test_the_next_job_waits_its_own_interval_from_the_other_jobs_request() -> None:
    a, b = two_jobs(0.0, 0.4)
    a.enqueue([req("http://h.test/1")])
    b.enqueue([req("http://h.test/2")])
    await a.next()
    sent_at = time.monotonic()
    a.record_sent("h.test", sent_at)
    await a.finish_host("h.test")
    leased = await asyncio.wait_for(b.next(), 2.0)
    assert leased is not None
    await b.wait_host_ready("h.test")
    assert time.monotonic() - sent_at >= 0.4
