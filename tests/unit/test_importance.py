"""Importance-first order (issue 18): OPIC cash (frontier/importance.py), and the
embedded frontier ordering each host's queue and new hosts' first visits by it, on
a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.unit.test_disk_frontier import Run
from trawler.config import ConfigError, build_config
from trawler.dedup import url_fingerprint
from trawler.frontier.importance import SEED_CASH, Importance
from trawler.records import CrawlRequest
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(60)


def req(url: str, depth: int = 1, parent: str | None = "http://a.test/") -> CrawlRequest:
    return CrawlRequest(url, depth, parent, host_key(url), url_fingerprint(url))


def test_a_fetched_page_shares_its_cash_equally_among_its_links() -> None:
    cash = Importance()
    seed = req("http://a.test/", 0, None)
    cash.queued(seed)
    assert cash.rank(seed) == SEED_CASH
    cash.leased(seed)
    assert seed.importance == SEED_CASH and cash.host_rank("a.test") == 0.0
    queued, new, fetched = req("http://a.test/q"), req("http://b.test/n"), req("http://a.test/f")
    cash.queued(queued)  # queued before, with no cash yet
    cash.spread(seed, [queued, new, fetched, seed], new=[new])
    share = SEED_CASH / 4
    assert (cash.rank(queued), cash.rank(new)) == (share, share)
    assert fetched.fp not in cash._cash and seed.importance == 0.0  # no cash for fetched pages
    assert cash.host_rank("b.test") == share and cash.risen == {"a.test", "b.test"}


def test_cash_travels_with_a_leased_url_and_comes_back_with_it() -> None:
    cash = Importance()
    page = req("http://a.test/p")
    cash.spread(req("http://a.test/", 0, None), [], [])  # nothing to spread: no error
    cash.queued(page)
    assert cash.rank(page) == 0.0  # a found link holds only the shares it got
    cash._credit(page.host, page.fp, 0.5)
    cash.leased(page)
    assert len(cash) == 0 and cash.rank(page) == 0.5  # leased: what it carries
    cash.queued(page)  # handed back
    assert cash.rank(page) == 0.5 and page.importance == 0.0


async def importance_order(tmp_path: Path, priority: str) -> list[str]:
    """A host with five queued URLs, deeper ones gaining cash after they were queued."""
    options = {"importance": Importance(), "window": 8} if priority == "importance" else {}
    run = Run(tmp_path, **options)  # type: ignore[arg-type]
    cash = run.frontier.importance
    home = req("http://a.test/", 0, None)
    await run.add([home])
    leased = await run.lease()
    shallow = [req(f"http://a.test/s{i}") for i in range(3)]
    deep = [req(f"http://a.test/d{i}", 2) for i in range(2)]
    await run.add(shallow + deep)
    if cash is not None:
        cash.spread(leased, shallow + deep, [])  # equal shares
        popular = req("http://a.test/s0")
        popular.importance = 1.0
        cash.spread(popular, [deep[1]], [])  # d1 gets more, after it was queued
    run.commit(done=[leased])
    return [request.url.rsplit("/", 1)[1] for request in await run.drain()]


async def test_a_host_queue_goes_by_cash_received_even_after_queueing(tmp_path: Path) -> None:
    assert await importance_order(tmp_path / "i", "importance") == ["d1", "s0", "s1", "s2", "d0"]
    assert await importance_order(tmp_path / "d", "depth") == ["s0", "s1", "s2", "d0", "d1"]


async def test_new_hosts_are_first_visited_by_their_cash(tmp_path: Path) -> None:
    run = Run(tmp_path, importance=Importance())  # type: ignore[arg-type]
    cash = run.frontier.importance
    assert cash is not None
    links = [req(f"http://h{i}.test/") for i in range(4)]
    await run.add(links)  # queued with nothing: first come, first served
    page = req("http://a.test/x")
    page.importance = 1.0
    cash.spread(page, [links[2], links[2], links[3]], [])  # h2 rises past the others
    first = await asyncio.wait_for(run.frontier.next(), 5)
    assert first is not None and first.host == "h2.test"
    second = await asyncio.wait_for(run.frontier.next(), 5)
    assert second is not None and second.host == "h3.test"


def test_priority_is_an_option_of_every_layer(tmp_path: Path) -> None:
    assert build_config({}).priority == "depth"
    toml = tmp_path / "crawl.toml"
    toml.write_text('priority = "importance"\n')
    assert build_config({}, toml).priority == "importance"
    assert build_config({}, environ={"TRAWLER_PRIORITY": "importance"}).priority == "importance"
    with pytest.raises(ConfigError, match="priority"):
        build_config({"priority": "pagerank"})
