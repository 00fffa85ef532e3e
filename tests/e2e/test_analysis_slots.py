"""A page waiting for its analysis holds no task slot: a host whose turn has come
is fetched while the parser process is busy, read from the server's log.

The parser process is held busy (a sleep queued ahead of every page) while a
crawl with ``--concurrency 1`` (4 task slots) fetches 3 hosts x 8 seed pages.
Before, each fetched page kept its task slot until analysed: 4 pages were
fetched in the stall, then nothing until the parser answered. Now a page in
the analysis queue is bounded by bytes (throttle.ANALYSIS_QUEUE_BYTES) instead,
and the fetching goes on.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_rules import ROBOTS
from trawler.config import CrawlConfig
from trawler.engine import TASKS_PER_SLOT, Crawler
from trawler.services import Services
from trawler.store.embedded import EmbeddedBackend
from trawler.throttle import ANALYSIS_QUEUE_BYTES, PAGE_OVERHEAD_BYTES

pytestmark = pytest.mark.timeout(120)

HOSTS = 3
PAGES = 8  # seeds a host
STALL_S = 4.0


def body(n: int) -> str:
    return f"<html><body><p>page {n}</p></body></html>"


def site() -> dict:
    script: dict = {"/robots.txt": ROBOTS}
    for n in range(PAGES):
        script[f"/p{n}"] = page(body(n))
    return {str(host): script for host in range(HOSTS)}


def fetched_in_stall(tmp_path: Path, queue_bytes: int = ANALYSIS_QUEUE_BYTES) -> int:
    """Pages the server served while the parser process was busy."""
    server = start_scripted(tmp_path, site())
    try:
        seeds = [f"{base}/p{n}" for base in server.bases for n in range(PAGES)]
        parser_free_at = asyncio.run(
            crawl_while_the_parser_stalls(seeds, tmp_path / "d", queue_bytes)
        )
    finally:
        server.stop()
    pages = [e for e in server.log() if e["path"] != "/robots.txt"]
    assert len(pages) == HOSTS * PAGES
    return sum(1 for e in pages if e["t"] < parser_free_at)


async def crawl_while_the_parser_stalls(
    seeds: list[str], data: Path, queue_bytes: int = ANALYSIS_QUEUE_BYTES
) -> float:
    """Crawl with the parser process busy for STALL_S first, ``queue_bytes`` for the
    pages waiting for it; when it became free."""
    config = CrawlConfig(
        allow_private=True, delay_s=0.05, max_crawl_delay_s=0.05, concurrency=1,
        parse_processes=1, sitemaps=False, scope="any", max_depth=0,
    )  # fmt: skip
    services = Services(parse_processes=1)
    backend = EmbeddedBackend(data)
    backend.store.create_job(config)
    crawler = Crawler(config, backend, seeds=[seeds], services=services)
    crawler.analysing.limit_bytes = queue_bytes
    services.parsers.start()
    stall = services.parsers.submit(time.sleep, STALL_S)  # ahead of every page
    run = asyncio.create_task(crawler.run(0))
    await asyncio.wait_for(stall, 60)
    parser_free_at = time.time()
    try:
        assert await asyncio.wait_for(run, 60)
    finally:
        await services.close()
    return parser_free_at


def test_pages_waiting_for_analysis_hold_no_task_slot(tmp_path: Path) -> None:
    during_stall = fetched_in_stall(tmp_path)
    slots = 1 * TASKS_PER_SLOT
    # Before: 4 (the task slots, each held by a page waiting for the parser).
    assert during_stall >= 3 * slots, f"{during_stall} pages fetched while the parser was busy"


def test_the_pages_waiting_for_analysis_are_bounded_by_their_bytes(tmp_path: Path) -> None:
    """Room for two pages in the analysis queue: then the task slots fill up again."""
    two_pages = 2 * (PAGE_OVERHEAD_BYTES + 2 * len(body(0)))
    during_stall = fetched_in_stall(tmp_path, two_pages)
    # Two pages in the queue, four more holding the task slots while they wait for room.
    assert during_stall == 2 + 1 * TASKS_PER_SLOT
