"""Idempotent commits (issue 17) against a real PostgreSQL: the connection is really
cut after the server got a commit's COMMIT and before the client heard back, and the
retried commit counts its counters and attempt rows once. Without a ``CommitKey``
the same cut counts them twice: the check can fail."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from trawler.config import CrawlConfig
from trawler.outage import postgres_health
from trawler.store.postgres import CommitKey, PostgresStore

from .test_pg_totals import page

# The simple-query message psycopg sends to end a transaction: 'Q', length, text, NUL.
COMMIT_MESSAGE = b"Q\x00\x00\x00\x0bCOMMIT\x00"


class CommitCutter:
    """A TCP proxy to PostgreSQL. Armed, it forwards the next COMMIT, drops the
    server's answer, waits for the server to commit, and cuts the client off: the
    commit happened and the client cannot know it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.armed = False
        self.cuts = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter):
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.port)
        cutting = asyncio.Event()

        async def up() -> None:
            while data := await client_r.read(65536):
                if self.armed and COMMIT_MESSAGE in data:
                    self.armed = False
                    cutting.set()  # nothing more reaches the client
                    self.cuts += 1
                    server_w.write(data)
                    await server_w.drain()
                    await asyncio.sleep(0.5)  # the server commits meanwhile
                    break
                server_w.write(data)
                await server_w.drain()

        async def down() -> None:
            while data := await server_r.read(65536):
                if not cutting.is_set():  # else the answer to COMMIT: dropped
                    client_w.write(data)
                    await client_w.drain()
            await cutting.wait()  # the server hung up first: up() decides when to cut

        pumps = [asyncio.create_task(up()), asyncio.create_task(down())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            client_w.transport.abort()
            server_w.transport.abort()


@pytest.fixture
async def cutter(fresh_postgres_url: str) -> AsyncIterator[tuple[CommitCutter, str]]:
    parts = urlsplit(fresh_postgres_url)
    proxy = CommitCutter(parts.port or 5432)
    port = await proxy.start()
    netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
    yield proxy, urlunsplit(parts._replace(netloc=netloc))
    await proxy.close()


def counted(url: str, job_id: str) -> tuple[int, int, int]:
    """(the `fetched` counter, attempt rows, pages) of the job, read directly."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT value FROM counters WHERE job_id = %s AND name = 'fetched'),"
            " (SELECT count(*) FROM fetch_attempts WHERE job_id = %s),"
            " (SELECT count(*) FROM pages WHERE job_id = %s)",
            (job_id, job_id, job_id),
        ).fetchone()
        assert row is not None
        return row


async def cut_commit(url: str, proxy: CommitCutter, key: CommitKey | None) -> tuple[str, int]:
    """Two batches through the proxy, the second's COMMIT cut off and retried."""
    health = postgres_health(url)
    async with await PostgresStore.connect(url, health=health, max_connections=1) as store:
        job_id = await store.create_job(CrawlConfig(), "running")
        attempt = ("http://a.test/1", 1, 1.0, 0.1, 200, None, "stored")
        first = CommitKey.new("w1") if key is not None else None
        await store.store_batch(job_id, [page(1)], {"fetched": 1}, [attempt], commit=first)
        proxy.armed = True
        attempts = [(f"http://a.test/{i}", 1, 1.0, 0.1, 200, None, "stored") for i in (2, 3)]
        total = await store.store_batch(
            job_id, [page(2), page(3)], {"fetched": 2}, attempts, commit=key
        )
    assert proxy.cuts == 1 and health.up  # the cut happened, and was ridden out
    return job_id, total


async def test_a_commit_retried_after_its_commit_was_cut_off_counts_once(
    fresh_postgres_url: str, cutter: tuple[CommitCutter, str]
) -> None:
    proxy, url = cutter
    job_id, total = await cut_commit(url, proxy, CommitKey.new("w1"))
    assert counted(fresh_postgres_url, job_id) == (3, 3, 3)
    assert total == 3  # the retry answers the job's pages all the same


async def test_without_a_commit_key_the_same_cut_counts_twice(
    fresh_postgres_url: str, cutter: tuple[CommitCutter, str]
) -> None:
    proxy, url = cutter
    job_id, _total = await cut_commit(url, proxy, None)
    assert counted(fresh_postgres_url, job_id) == (5, 5, 3)  # pages once: ON CONFLICT


async def test_a_writer_keeps_one_row_and_a_new_id_is_applied(fresh_postgres_url: str) -> None:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job_id = await store.create_job(CrawlConfig(), "running")
        key = CommitKey.new("w1")
        for commit in (key, key, CommitKey.new("w1"), CommitKey.new("w2")):
            await store.store_batch(job_id, counters={"fetched": 1}, commit=commit)
        assert counted(fresh_postgres_url, job_id)[0] == 3
    with psycopg.connect(fresh_postgres_url) as conn, contextlib.closing(conn.cursor()) as cur:
        cur.execute("SELECT writer FROM applied_commits WHERE job_id = %s ORDER BY 1", (job_id,))
        assert cur.fetchall() == [("w1",), ("w2",)]
