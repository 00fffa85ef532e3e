"""A large batch is committed in chunks, each scheduled as soon as it is durable.

At the benchmark's start the sitemaps of 2,000 hosts came back within a second
and their 31,654 new URLs went into one 34,054-row transaction that took 2.7 s:
no host had its next URL until it ended (bench/RESULTS.md). A real data
directory here: 200 hosts' sitemaps, each listing 50 URLs, in one batch.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest
from trawler.store.base import DONE, CommitBatch, UrlOutcome
from trawler.store.embedded import COMMIT_CHUNK_ITEMS, EmbeddedBackend
from trawler.store.sqlite import DB_NAME

pytestmark = pytest.mark.timeout(60)

HOSTS = 200
LISTED = 50  # URLs a sitemap lists


def request(host: str, path: str, depth: int = 0) -> CrawlRequest:
    url = f"http://{host}{path}"
    return CrawlRequest(url, depth, None, host, url_fingerprint(url))


def sitemap_outcome(sitemap: CrawlRequest) -> UrlOutcome:
    listed = [request(sitemap.host, f"/p/{n}.html", 1) for n in range(LISTED)]
    attempt = (sitemap.url, 1, 0.0, 0.01, 200, None, DONE)
    return UrlOutcome(sitemap, DONE, [attempt], discovered=listed)


def chunk_rows(batch: CommitBatch) -> list[int]:
    return [len(chunk) for chunk in batch.chunks(COMMIT_CHUNK_ITEMS)]


async def first_url_while_committing(data: Path) -> tuple[bool, int, bool]:
    """Lease every host's sitemap, commit the batch of their outcomes, and lease the
    first host's next URL as soon as there is one: whether the commit was still
    going then, the URL rows durable at that moment, and whether that URL's was."""
    config = CrawlConfig(delay_s=0, allow_private=True)
    backend = EmbeddedBackend(data)
    backend.store.create_job(config)
    frontier = await backend.open(config)
    try:
        seeds = CommitBatch()
        seeds.add_requests([request(f"h{n}.test", "/sitemap.xml") for n in range(HOSTS)])
        await backend.commit(seeds)
        batch = CommitBatch()
        for _ in range(HOSTS):
            sitemap = await asyncio.wait_for(frontier.next(), 10)
            assert sitemap is not None
            frontier.record_response(sitemap.host, 200, None, None)
            await frontier.finish_host(sitemap.host)  # answered: the host is free again
            batch.add(sitemap_outcome(sitemap))
        assert max(chunk_rows(batch)) <= COMMIT_CHUNK_ITEMS < len(batch)
        commit = asyncio.create_task(backend.commit(batch))
        first = await asyncio.wait_for(frontier.next(), 30)
        assert first is not None
        going = not commit.done()
        reader = sqlite3.connect(data / DB_NAME)
        rows = reader.execute("SELECT count(*) FROM urls").fetchone()[0]
        durable = reader.execute("SELECT 1 FROM urls WHERE url = ?", (first.url,)).fetchone()
        reader.close()
        await commit
        return going, rows, durable is not None
    finally:
        await backend.close()


def test_a_large_batch_is_committed_in_chunks_each_scheduled_when_durable(
    tmp_path: Path,
) -> None:
    going, rows, durable = asyncio.run(first_url_while_committing(tmp_path))
    # Before: the first host's next URL came only once the whole batch was committed.
    assert going, "no URL of the batch was handed out before the whole batch was committed"
    assert durable  # a URL handed out is committed (kill -9 loses nothing)
    assert HOSTS < rows < HOSTS * (1 + LISTED)


def test_chunks_keep_each_outcome_whole_and_the_robots_and_seeds_first() -> None:
    batch = CommitBatch()
    batch.add_requests([request("s.test", "/seed")])
    for n in range(HOSTS):
        batch.add(sitemap_outcome(request(f"h{n}.test", "/sitemap.xml")))
    batch.counters = {"sitemaps.fetched": HOSTS}
    chunks = batch.chunks(COMMIT_CHUNK_ITEMS)
    assert len(chunks) > 1
    assert [o for chunk in chunks for o in chunk.outcomes] == batch.outcomes  # in order
    assert chunks[0].new_requests == batch.new_requests
    assert chunks[0].counters == batch.counters
    assert all(not chunk.new_requests and not chunk.counters for chunk in chunks[1:])
    assert sum(chunk.pages for chunk in chunks) == batch.pages
    assert all(len(chunk) <= COMMIT_CHUNK_ITEMS for chunk in chunks)
    small = CommitBatch()
    small.add(sitemap_outcome(request("a.test", "/sitemap.xml")))
    assert small.chunks(COMMIT_CHUNK_ITEMS) == [small]
