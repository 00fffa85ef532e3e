"""A crawl whose parser process leaves out the links the loop has taken already
(knownlinks.py) decides every URL as one that analyses its pages inline: the
same URLs fetched and skipped, the same counters, the same provenance. The
generated web, one host: its robots.txt disallows /private/, its pages link
nofollow, repeat their navigation and link binary files."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Served, start_testsite
from trawler.config import CrawlConfig
from trawler.discovery import Discovery
from trawler.engine import Crawler
from trawler.linkfilter import LinkFilter
from trawler.parsers import ParserProcesses
from trawler.provenance import Found
from trawler.records import CrawlRequest
from trawler.services import Services
from trawler.store.embedded import EmbeddedBackend
from trawler.store.sqlite import DB_NAME

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def one_host(tmp_path: Path) -> Iterator[Served]:
    served = start_testsite(tmp_path, hosts=1, pages=30)
    yield served
    served.process.terminate()
    served.process.wait(10)


Decisions = tuple[set[tuple], dict[str, int], set[tuple]]


def crawl(served: Served, data: Path, processes: int) -> tuple[Decisions, int]:
    """What the crawl decided, and how many link requests reached the loop."""
    carried = 0
    robots_checked = LinkFilter.robots_checked

    def counting(
        self: LinkFilter, requests: list[CrawlRequest], allowed: list[int] | None = None
    ) -> list[CrawlRequest]:
        nonlocal carried
        carried += len(requests)
        return robots_checked(self, requests, allowed)

    LinkFilter.robots_checked = counting  # type: ignore[method-assign]
    try:
        asyncio.run(run_crawl(served.seeds, data, processes))
    finally:
        LinkFilter.robots_checked = robots_checked  # type: ignore[method-assign]
    return decisions(data / DB_NAME), carried


async def run_crawl(seeds: list[str], data: Path, processes: int) -> None:
    config = CrawlConfig(
        allow_private=True, delay_s=0.01, max_crawl_delay_s=0.01, sitemaps=False,
        parse_processes=processes,
    )  # fmt: skip
    services = Services(parse_processes=processes)
    backend = EmbeddedBackend(data)
    backend.store.create_job(config)
    try:
        assert await Crawler(config, backend, seeds=[seeds], services=services).run(0)
    finally:
        await services.close()


def decisions(db: Path) -> Decisions:
    conn = sqlite3.connect(db)
    try:
        urls = set(conn.execute("SELECT url, state, reason FROM urls"))
        counters = dict(conn.execute(
            "SELECT name, value FROM counters"
            " WHERE name LIKE 'rejected.%' OR name LIKE 'skipped.%' OR name LIKE 'pages%'"
        ))  # fmt: skip
        provenance = set(conn.execute("SELECT url, via, reason, detail FROM provenance"))
    finally:
        conn.close()
    return urls, counters, provenance


@pytest.mark.parametrize("processes", [1, 2])
def test_leaving_known_links_out_decides_every_url_alike(
    one_host: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """Two processes take the batches in turn, as busy ones would (one host here
    leaves the first idle for each): each is told all of the run's news. Told only
    what went with its own batches, as before, 142 links reached the loop, not 69."""
    inline, carried_inline = crawl(one_host, tmp_path / "inline", 0)
    turns = itertools.count()

    def in_turn(self: ParserProcesses) -> int:
        self.start()
        return next(turns) % self.processes

    monkeypatch.setattr(ParserProcesses, "least_busy", in_turn)
    told, carried_told = crawl(one_host, tmp_path / "told", processes)
    urls, counters, provenance = told
    assert len(urls) > 30 and counters["rejected.robots"] > 0  # a web worth comparing
    assert told == inline
    # The links repeat: most never reached the loop.
    assert carried_told < carried_inline / 2, (carried_told, carried_inline)


def test_the_comparison_sees_links_left_out_wrongly(
    one_host: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A twin whose loop tells the parser process the links robots.txt disallows
    too counts fewer of them rejected: the test above can fail."""
    inline, _ = crawl(one_host, tmp_path / "inline", 0)
    robots_checked = Discovery._robots_checked

    def over_telling(
        self: Discovery,
        requests: list[CrawlRequest],
        found: Found,
        allowed: list[int] | None = None,
    ) -> list[CrawlRequest]:
        kept = robots_checked(self, requests, found, allowed)
        if allowed is not None:
            allowed += [r.fp for r in requests if r not in kept]
        return kept

    monkeypatch.setattr(Discovery, "_robots_checked", over_telling)
    told, _ = crawl(one_host, tmp_path / "told", 1)
    assert told[1]["rejected.robots"] < inline[1]["rejected.robots"]
