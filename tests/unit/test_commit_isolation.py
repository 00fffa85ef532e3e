"""A page that cannot be committed costs that page, never its batch: both backends.

Real stores: an embedded data directory (SQLite + WARC files), and a real
PostgreSQL + redis-server with a worker's WARC directory. The bad pages are
real rejections: a status PostgreSQL and SQLite refuse (out of integer range)
and a WARC record that cannot be built (a date past year 9999).
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.store import pg_graph, sqlite_graph
from trawler.store.base import DEAD, DONE, STORE_ERROR, CommitBatch, UrlOutcome
from trawler.store.distributed import DistributedBackend
from trawler.store.embedded import EmbeddedBackend
from trawler.store.postgres import PostgresStore
from trawler.store.sqlite import DEAD as DEAD_STATE
from trawler.store.sqlite_totals import FAILED, totals
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(60)

CONFIG = CrawlConfig(delay_s=0.0, parse_processes=0)
TOO_BIG_STATUS = 2**70  # no INTEGER column of either database holds it
PAST_YEAR_9999 = 1e12  # WARC-Date cannot be written for it


def req(url: str, depth: int = 0) -> CrawlRequest:
    return CrawlRequest(url, depth, None, host_key(url), url_fingerprint(url))


def fetched(request: CrawlRequest, state: str = DONE, **bad: object) -> UrlOutcome:
    """A 200 page with one link, its attempt row and its WARC material."""
    body = b"<html><title>t</title><a href=/x>x</a></html>"
    result = FetchResult(
        request.url, request.url, status=200, content_type="text/html", body=body,
        raw_body=body, headers=[("Content-Type", "text/html")], started_at=1_700_000_000.0,
    )  # fmt: skip
    page = PageRecord(
        url=request.url, final_url=request.url, status=200, content_type="text/html",
        content_length=len(body), depth=request.depth, parent_url=None, title="t",
        description=None, keywords=None, text="x", links_count=1, content_sha256=None,
        fetched_at=1_700_000_000.0, fetch_duration_s=0.01, error=None, host=request.host,
    )  # fmt: skip
    for name, value in bad.items():
        setattr(result if name == "started_at" else page, name, value)
    decision = "dead" if state == DEAD else "done"
    attempt = (request.url, 1, 1_700_000_000.0, 0.01, 200, None, decision)
    link = req(request.url.rstrip("/") + "/found")
    edge = (link.url, link.fp, "x", None, None)  # the link graph's (graph.py)
    return UrlOutcome(request, state, [attempt], result, page, [link], edges=[edge])


@dataclass
class Stored:
    pages: dict[str, dict]  # url -> export row
    attempts: list[str]  # url of each attempt row
    edges: list[tuple[str, str]]  # (from_url, to_url) of each edge row


@dataclass
class Harness:
    backend: EmbeddedBackend | DistributedBackend
    warc_dir: Path
    read: Callable[[], Awaitable[Stored]]
    dead_letter: Callable[[], Awaitable[int]]


async def lease_all(backend: EmbeddedBackend | DistributedBackend, urls: list[str]) -> list:
    """Open the backend, queue ``urls`` through a commit, and lease them all."""
    frontier = await backend.open(CONFIG)
    await backend.commit(CommitBatch(new_requests=[req(url) for url in urls]))
    leased = []
    for _ in urls:
        request = await asyncio.wait_for(frontier.next(), 10)
        assert request is not None
        await frontier.finish_host(request.host)
        leased.append(request)
    return sorted(leased, key=lambda r: r.url)


async def drain(backend: EmbeddedBackend | DistributedBackend) -> list[str]:
    """URLs still to crawl: handed out, then acknowledged by an empty-handed commit."""
    assert backend.frontier is not None
    urls = []
    while (request := await asyncio.wait_for(backend.frontier.next(), 10)) is not None:
        await backend.frontier.finish_host(request.host)
        await backend.commit(CommitBatch(outcomes=[UrlOutcome(request, "skipped", reason="t")]))
        urls.append(request.url)
    return sorted(urls)


def warc_targets(warc_dir: Path) -> list[str]:
    targets = []
    for path in sorted(warc_dir.glob("*.warc.gz*")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    targets.append(record.rec_headers.get_header("WARC-Target-URI"))
    return targets


class CommitIsolationContract:
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        raise NotImplementedError
        yield

    async def test_rejected_pages_cost_only_themselves(self, harness: Harness) -> None:
        host = f"http://{uuid.uuid4().hex[:8]}.test"
        urls = [f"{host}/{name}/" for name in ("a", "bad-row", "bad-warc", "d", "dead")]
        a, bad_row, bad_warc, d, dead = await lease_all(harness.backend, urls)
        batch = CommitBatch()
        batch.add(fetched(a))
        batch.add(fetched(bad_row, status=TOO_BIG_STATUS))
        batch.add(fetched(bad_warc, started_at=PAST_YEAR_9999))
        batch.add(fetched(d))
        batch.add(fetched(dead, DEAD))
        await harness.backend.commit(batch)  # does not raise

        stored = await harness.read()
        assert sorted(stored.pages) == sorted(urls), "every URL has its page row"
        good = [a.url, d.url, dead.url]
        assert all(stored.pages[url]["error"] is None for url in good)
        for url in (bad_row.url, bad_warc.url):
            row = stored.pages[url]
            assert row["error"] == STORE_ERROR and row["status"] is None
        # Row and WARC agree: a place for the record written, none for the one that failed.
        assert stored.pages[bad_row.url]["warc_file"] is not None
        bad_warc_row = stored.pages[bad_warc.url]
        assert bad_warc_row["warc_file"] is None and bad_warc_row["warc_offset"] is None
        targets = warc_targets(harness.warc_dir)  # fsynced by the commit
        assert set(good) | {bad_row.url} <= set(targets) and bad_warc.url not in targets
        # Each URL's attempt row went in with its page.
        assert sorted(stored.attempts) == sorted(urls)
        assert await harness.dead_letter() == 1

    async def test_edges_go_with_their_page_once(self, harness: Harness) -> None:
        """A page's edges are stored with it, once: none for a page kept as a bare
        ``store_error`` row, none again for a page stored a second time (a lease that
        expired and was fetched again)."""
        host = f"http://{uuid.uuid4().hex[:8]}.test"
        urls = [f"{host}/{name}/" for name in ("a", "bad", "d")]
        a, bad, d = await lease_all(harness.backend, urls)
        batch = CommitBatch()
        for outcome in (fetched(a), fetched(bad, status=TOO_BIG_STATUS), fetched(d)):
            batch.add(outcome)
        await harness.backend.commit(batch)
        again = CommitBatch()
        again.add(fetched(a))
        await harness.backend.commit(again)
        edges = (await harness.read()).edges
        assert sorted(edges) == [(a.url, a.url + "found"), (d.url, d.url + "found")]

    async def test_urls_of_rejected_pages_are_finished(self, harness: Harness) -> None:
        host = f"http://{uuid.uuid4().hex[:8]}.test"
        urls = [f"{host}/{name}/" for name in ("a", "bad")]
        a, bad = await lease_all(harness.backend, urls)
        batch = CommitBatch()
        batch.add(fetched(a))
        batch.add(fetched(bad, status=TOO_BIG_STATUS))
        await harness.backend.commit(batch)
        # Not a poison pill: the bad URL is not handed out again, its links are not
        # followed (the row was not stored), the good page's link is.
        assert await drain(harness.backend) == [f"{host}/a/found"]


class TestEmbedded(CommitIsolationContract):
    @pytest.fixture
    async def harness(self, tmp_path: Path) -> AsyncIterator[Harness]:
        backend = EmbeddedBackend(tmp_path)
        db_path = tmp_path / "trawler.db"

        async def read() -> Stored:
            with sqlite3.connect(db_path) as conn:
                conn.row_factory = sqlite3.Row
                pages = {r["url"]: dict(r) for r in conn.execute("SELECT * FROM pages")}
                attempts = [url for (url,) in conn.execute("SELECT url FROM fetch_attempts")]
                edges = [(e["from_url"], e["to_url"]) for e in sqlite_graph.iter_edges(conn)]
            return Stored(pages, attempts, edges)

        async def dead_letter() -> int:
            with sqlite3.connect(db_path) as conn:
                sql = f"SELECT count(*) FROM urls WHERE state = {DEAD_STATE}"
                return int(conn.execute(sql).fetchone()[0])

        yield Harness(backend, tmp_path / "warc", read, dead_letter)
        if backend.frontier is not None:
            await backend.close()

    async def test_totals_are_what_counting_says(self, harness: Harness, tmp_path: Path) -> None:
        """The commit counts its pages and finished URLs itself (sqlite_totals): a batch
        written again one outcome at a time, after a rejected row, counts each once."""
        host = f"http://{uuid.uuid4().hex[:8]}.test"
        urls = [f"{host}/{name}/" for name in ("a", "bad", "dead", "skip")]
        a, bad, dead, skip = await lease_all(harness.backend, urls)
        batch = CommitBatch()
        batch.add(fetched(a))
        batch.add(fetched(bad, status=TOO_BIG_STATUS))
        batch.add(fetched(dead, DEAD))
        batch.add(UrlOutcome(skip, "skipped", reason="robots"))
        await harness.backend.commit(batch)
        with sqlite3.connect(tmp_path / "trawler.db") as conn:
            counted = conn.execute(
                f"SELECT count(*), sum(content_length), coalesce(sum({FAILED}), 0),"
                " (SELECT count(*) FROM urls WHERE state != 0) FROM pages"
            ).fetchone()
            kept = totals(conn)
        body = fetched(a).page.content_length  # type: ignore[union-attr]
        assert kept is not None and tuple(kept.values()) == counted == (3, 2 * body, 1, 4)


class TestDistributed(CommitIsolationContract):
    @pytest.fixture
    async def harness(
        self, tmp_path: Path, redis_url: str, fresh_postgres_url: str
    ) -> AsyncIterator[Harness]:
        store = await PostgresStore.connect(fresh_postgres_url)
        job_id = await store.create_job(CONFIG, state="running")
        warc_dir = tmp_path / "warc"
        backend = DistributedBackend(store, redis_url, job_id, warc_dir, "isolation-1")

        async def read() -> Stored:
            pages = {row["url"]: row async for row in store.iter_pages(job_id, True)}
            async with store.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT url FROM fetch_attempts WHERE job_id = %s", (job_id,)
                )
                attempts = [url for (url,) in await cur.fetchall()]
                async with conn.transaction():
                    found = pg_graph.iter_edges(conn, job_id)
                    edges = [(e["from_url"], e["to_url"]) async for e in found]
            return Stored(pages, attempts, edges)

        async def dead_letter() -> int:
            return (await store.read_stats(job_id))["counters"].get("dead_letter", 0)

        yield Harness(backend, warc_dir, read, dead_letter)
        if backend.frontier is not None:
            await backend.close()
        await store.close()
