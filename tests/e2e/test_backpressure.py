"""Back-pressure: while a commit waits on the disk, fetching goes on, and the batch
waiting for the next commit stops growing at its limit: discovery never outruns
the commit. A real crawl of a loopback site and a real data directory; one commit
is held up on the backend's writer thread for 1.5 s, as a slow disk would hold it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_rules import ROBOTS, links
from trawler.config import CrawlConfig
from trawler.engine import Crawler
from trawler.store.base import CommitBatch
from trawler.store.embedded import EmbeddedBackend
from trawler.store.sqlite import DB_NAME
from trawler.throttle import PAGE_OVERHEAD_BYTES
from trawler.urls import normalise

pytestmark = pytest.mark.timeout(120)

HOSTS = 3
PAGES = 400  # a host
FANOUT = 10  # links a page: one outcome is at most 2 + FANOUT rows
LIMIT = 60
HELD_S = 1.5
LIMIT_BYTES = 16 * PAGE_OVERHEAD_BYTES  # ~15 of these small pages (~30 are fetched meanwhile)


def tree_site() -> dict:
    """On each host, / links to /p1../p10, /pN to /p(10N+1)..: 401 pages."""
    script: dict = {"/robots.txt": ROBOTS}
    for n in range(PAGES + 1):
        children = range(FANOUT * n + 1, min(FANOUT * n + FANOUT, PAGES) + 1)
        script["/" if n == 0 else f"/p{n}"] = page(links(*(f"/p{c}" for c in children)))
    return {str(host): script for host in range(HOSTS)}


async def crawl_with_one_commit_held(
    seeds: list[str], data: Path, by_bytes: bool = False
) -> list[int]:
    """Crawl, holding up the first commit that has pages; the size of every batch
    (its rows, or with ``by_bytes`` its pages' bytes and a limit in bytes only)."""
    config = CrawlConfig(
        allow_private=True, delay_s=0, parse_processes=0, concurrency=16,
        sitemaps=False, scope="any", max_crawl_delay_s=0.01,
    )  # fmt: skip
    backend = EmbeddedBackend(data)
    backend.store.create_job(config)
    crawler = Crawler(config, backend, seeds=[[normalise(seed) or seed for seed in seeds]])
    if by_bytes:
        crawler.commits.limit_bytes = LIMIT_BYTES
    else:
        crawler.commits.limit = LIMIT
    sizes: list[int] = []
    commit = backend.commit

    async def commit_held_once(batch: CommitBatch) -> None:
        sizes.append(batch.size_bytes if by_bytes else len(batch))
        if batch.pages > 5 and len(sizes) < 100 and not held:
            held.append(batch)
            await backend._in_writer(time.sleep, HELD_S)  # the writer thread is busy
        await commit(batch)

    held: list[CommitBatch] = []

    backend.commit = commit_held_once  # type: ignore[method-assign]
    assert await asyncio.wait_for(crawler.run(0), 100)
    return sizes


def test_the_batch_waiting_on_a_commit_is_bounded(tmp_path: Path) -> None:
    server = start_scripted(tmp_path, tree_site())
    try:
        seeds = [base + "/" for base in server.bases]
        sizes = asyncio.run(crawl_with_one_commit_held(seeds, tmp_path / "d"))
    finally:
        server.stop()
    largest = max(sizes)
    assert largest <= LIMIT + 2 + FANOUT, f"a batch grew to {largest} rows (limit {LIMIT})"
    # Fetching went on while the commit was held: the next batch filled up to its limit.
    assert largest >= LIMIT, sizes
    stored = sqlite3.connect(tmp_path / "d" / DB_NAME).execute("SELECT count(*) FROM pages")
    assert stored.fetchone()[0] == HOSTS * (PAGES + 1)


def test_the_batch_waiting_on_a_commit_is_bounded_in_bytes_too(tmp_path: Path) -> None:
    """Rows are not memory: the batch stops growing at its bytes of pages, whatever
    its rows (commits.py, BATCH_LIMIT_BYTES)."""
    server = start_scripted(tmp_path, tree_site())
    try:
        seeds = [base + "/" for base in server.bases]
        sizes = asyncio.run(crawl_with_one_commit_held(seeds, tmp_path / "d", by_bytes=True))
    finally:
        server.stop()
    largest = max(sizes)
    # One page over the limit at most: the one whose room was checked before it.
    assert largest <= LIMIT_BYTES + 2 * PAGE_OVERHEAD_BYTES, (largest, LIMIT_BYTES)
    assert largest >= LIMIT_BYTES, sizes
    stored = sqlite3.connect(tmp_path / "d" / DB_NAME).execute("SELECT count(*) FROM pages")
    assert stored.fetchone()[0] == HOSTS * (PAGES + 1)
