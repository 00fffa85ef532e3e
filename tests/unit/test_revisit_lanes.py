"""Revisits in the embedded frontier (recrawl_lanes.py, frontier/sqlite.py): the turn
rule between a host's new URLs and its due revisits, hand-back into the lane, the end
of a pass, and a poll read before a commit not bringing the committed page back."""

from __future__ import annotations

import asyncio

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.recrawl_lanes import REVISIT, revisit_request
from trawler.store.versions import RevisitState
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(30)

HOST = "http://a.test"


def new(path: str) -> CrawlRequest:
    url = HOST + path
    return CrawlRequest(url, 1, None, host_key(url), url_fingerprint(url))


def due(path: str) -> CrawlRequest:
    url = HOST + path
    state = RevisitState(url, host_key(url), url, None, None, "sha", None, 1, 0.0, 0.0, 0.0, 1.0)
    return revisit_request(state, 1)


def frontier() -> SqliteFrontier:
    return SqliteFrontier(PolitenessPolicy(delay_s=0.0))


async def turns(f: SqliteFrontier, count: int) -> list[str]:
    """The kinds of the next ``count`` leases, each host finished at once."""
    kinds = []
    for _ in range(count):
        request = await asyncio.wait_for(f.next(), 5)
        assert request is not None
        kinds.append("R" if request.kind == REVISIT else "N")
        await f.finish_host(request.host)
    return kinds


async def test_new_urls_and_revisits_take_turns_then_revisits_take_all() -> None:
    f = frontier()
    f.set_revisit_mode(continuous=False, discovery=True)
    f.enqueue([new(f"/n{i}") for i in range(3)])
    assert f.add_revisits([due(f"/r{i}") for i in range(5)], None) == 5
    # At most every other turn while new URLs wait; every turn once none do.
    assert await turns(f, 8) == ["R", "N", "R", "N", "R", "N", "R", "R"]
    f.ack(8)
    f.revisits_done([HOST + f"/r{i}" for i in range(5)])
    assert await asyncio.wait_for(f.next(), 5) is None  # a pass: done when all are


async def test_a_revisit_only_run_leaves_new_urls_queued() -> None:
    f = frontier()
    f.set_revisit_mode(continuous=False, discovery=False)
    f.enqueue([new("/n0")])
    f.add_revisits([due("/r0")], None)
    assert await turns(f, 1) == ["R"]
    f.ack(1)
    f.revisits_done([HOST + "/r0"])
    assert await asyncio.wait_for(f.next(), 5) is None
    assert f.queued == 1


async def test_a_revisit_handed_back_returns_to_its_lane() -> None:
    f = frontier()
    f.set_revisit_mode(continuous=False, discovery=True)
    f.add_revisits([due("/r0")], None)
    request = await asyncio.wait_for(f.next(), 5)
    assert request is not None and request.kind == REVISIT
    await f.hand_back(request)
    await f.finish_host(request.host)  # as the engine does, in its finally
    assert f.queued == 0  # not into the URL queues
    again = await asyncio.wait_for(f.next(), 5)
    assert again is request


async def test_a_page_pending_or_committed_after_the_poll_is_not_queued_again() -> None:
    f = frontier()
    f.set_revisit_mode(continuous=True, discovery=True)
    assert f.add_revisits([due("/r0")], f.revisit_poll_started()) == 1
    poll = f.revisit_poll_started()  # reads the row while its visit is leased
    assert f.add_revisits([due("/r0")], poll) == 0  # pending: once
    request = await asyncio.wait_for(f.next(), 5)
    assert request is not None
    await f.finish_host(request.host)
    f.revisits_done([request.url])  # committed after the poll began
    f.ack(1)
    assert f.add_revisits([due("/r0")], poll) == 0  # the poll's row is stale
    assert f.add_revisits([due("/r0")], f.revisit_poll_started()) == 1  # a later one is not


async def test_continuous_mode_waits_for_more_revisits() -> None:
    f = frontier()
    f.set_revisit_mode(continuous=True, discovery=True)
    waiting = asyncio.create_task(f.next())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # nothing queued, but more may come
    f.add_revisits([due("/r0")], None)
    request = await asyncio.wait_for(waiting, 5)
    assert request is not None and request.kind == REVISIT
