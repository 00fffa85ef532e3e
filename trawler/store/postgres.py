"""The distributed store: jobs, page metadata and counters in PostgreSQL.

Many workers on many machines write into one database, so every write is
idempotent and keyed by job: a page is stored at most once per (job, URL)
(``ON CONFLICT DO NOTHING``), counters are added with an upsert. The
frontier (seen set, queues, leases) lives in Redis, not here.

The schema is created and migrated on connect (pgschema.py: the migrations,
applied once however many workers start together).

With a ``ServiceHealth`` (workers), every call is retried through an outage
of any length (outage.py). ``PostgresStore`` holds the pool, that retried call
and the read side; its parts hold the rest: a job's row and scope (pg_jobs.py
``JobRows``), a commit batch's writes, applied once with a ``CommitKey``
(pg_commit.py ``BatchWrites``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from trawler.outage import ServiceHealth, guarded
from trawler.store.kinds import (
    DEFAULT_EXPORT_KINDS,
    EXPORT_KINDS,
    ROBOTS,
    ROBOTS_COLUMNS,
    amerge_rows,
    robots_export_row,
)
from trawler.store.pg_commit import ROW_REJECTED, BatchWrites, CommitKey
from trawler.store.pg_jobs import JobRows, insert_job
from trawler.store.pgschema import migrate
from trawler.store.pgstats import read_stats
from trawler.store.sqlite_export import EXPORT_COLUMNS

T = TypeVar("T")

GETCONN_TIMEOUT_S = 3.0  # then PoolTimeout, an OperationalError: retried in an outage
RECONNECT_TIMEOUT_S = 5.0


class PostgresUnavailable(ConnectionError):
    """PostgreSQL cannot be used; the message says why (refused, no such database, …)."""


class PostgresStore(JobRows, BatchWrites):
    """Jobs, pages, counters and fetch attempts of every job, over a connection pool.

    ``health``: retry every call through a PostgreSQL outage (workers); without
    it a call fails at once.
    """

    def __init__(self, pool: AsyncConnectionPool, health: ServiceHealth | None = None) -> None:
        self.pool = pool
        self.health = health

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        max_connections: int = 4,
        timeout_s: float = 30.0,
        health: ServiceHealth | None = None,
    ) -> PostgresStore:
        """Open a pool on ``url`` (``postgresql://…``) and migrate the schema.

        One direct connection first: a server that refuses, a missing database
        or a bad password raises ``PostgresUnavailable`` with the cause at once,
        where the pool would retry, logging warnings, until ``timeout_s``.

        A worker rides out outages once it has started (``health``); it does
        not wait for a server that may never have existed.
        """
        try:
            wait_s = max(1, int(timeout_s))
            probe = await psycopg.AsyncConnection.connect(url, connect_timeout=wait_s)
        except psycopg.OperationalError as exc:
            raise PostgresUnavailable(f"cannot connect to PostgreSQL: {exc}") from None
        await probe.close()
        # A pool retries a lost connection with doubling delays until it gives up
        # after reconnect_timeout; kept short, its next try follows a server's
        # return within seconds (the ServiceHealth keeps asking).
        pool = AsyncConnectionPool(
            url, min_size=1, max_size=max_connections, open=False,
            kwargs={"autocommit": True}, name="trawler-store",
            timeout=GETCONN_TIMEOUT_S, reconnect_timeout=RECONNECT_TIMEOUT_S,
        )  # fmt: skip
        try:
            await pool.open(wait=True, timeout=timeout_s)
            async with pool.connection() as conn:
                await migrate(conn)
        except PoolTimeout:
            await pool.close()
            message = f"cannot connect to PostgreSQL within {timeout_s:g} s"
            raise PostgresUnavailable(message) from None
        except BaseException:
            await pool.close()
            raise
        return cls(pool, health)

    async def close(self) -> None:
        await self.pool.close()

    async def _call(self, operation: Callable[[], Awaitable[T]]) -> T:
        return await guarded(self.health, operation)

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- read side ------------------------------------------------------------
    async def iter_pages(
        self,
        job_id: str,
        include_noindex: bool = False,
        batch_rows: int = 1000,
        kinds: frozenset[str] = DEFAULT_EXPORT_KINDS,
        with_text: bool = False,
    ) -> AsyncIterator[dict]:
        """Export rows (``EXPORT_COLUMNS``, and ``text`` if ``with_text``) of these kinds:
        pages in commit order, robots.txt fetches merged in by fetch time, through
        server-side cursors in one transaction: memory stays flat however large the crawl."""
        columns = (*EXPORT_COLUMNS, "text") if with_text else EXPORT_COLUMNS
        page_kinds = [name for name in EXPORT_KINDS if name in kinds and name != ROBOTS]
        where = "job_id = %s AND kind = ANY(%s)" + ("" if include_noindex else " AND NOT noindex")
        pages_sql = f"SELECT {', '.join(columns)} FROM pages WHERE {where} ORDER BY id"
        robots_sql = (
            f"SELECT {', '.join(ROBOTS_COLUMNS)} FROM robots_fetches WHERE job_id = %s ORDER BY id"
        )
        async with self.pool.connection() as conn, conn.transaction():
            pages = _stream(conn, pages_sql, (job_id, page_kinds), batch_rows)
            rows: AsyncIterator[dict] = (
                dict(zip(columns, values, strict=True)) async for values in pages
            )
            if ROBOTS in kinds:
                robots = _stream(conn, robots_sql, (job_id,), batch_rows)
                found = (robots_export_row(values, columns) async for values in robots)
                rows = amerge_rows(rows, found)
            async for row in rows:
                yield row

    async def read_stats(self, job_id: str) -> dict:
        """The shape of ``trawler.store.sqlite_export.read_stats`` for one job.

        Numbers kept by the frontier (urls_discovered, urls_queued) are None
        here; the Redis frontier fills them in. ``hosts`` counts the hosts with
        a stored page; ``dead_letter`` the URLs whose retries ran out. The
        ``skipped`` reasons are the counters named ``skipped.<reason>``.
        """

        async def read() -> dict:
            async with self.pool.connection() as conn:
                return await read_stats(conn, job_id)

        return await self._call(read)


async def _stream(
    conn: psycopg.AsyncConnection, sql: str, params: tuple, batch_rows: int
) -> AsyncIterator[tuple]:
    """The rows of ``sql`` through a server-side cursor of their own."""
    cursor = conn.cursor(name=f"export_{uuid.uuid4().hex[:8]}")
    cursor.itersize = batch_rows
    async with cursor:
        await cursor.execute(sql, params)
        async for row in cursor:
            yield row


# What Trawler and its tests import from here, some of it defined by the store's
# parts (pg_commit.py, pg_jobs.py): one module to import the store from.
__all__ = [
    "EXPORT_COLUMNS",
    "GETCONN_TIMEOUT_S",
    "RECONNECT_TIMEOUT_S",
    "ROW_REJECTED",
    "CommitKey",
    "PostgresStore",
    "PostgresUnavailable",
    "insert_job",
]
