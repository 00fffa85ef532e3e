"""The distributed store: jobs, page metadata and counters in PostgreSQL.

Many workers on many machines write into one database, so every write is
idempotent and keyed by job: a page is stored at most once per (job, URL)
(``ON CONFLICT DO NOTHING``), counters are added with an upsert. The
frontier (seen set, queues, leases) lives in Redis, not here.

The schema is created and migrated on connect (pgschema.py: the migrations,
applied once however many workers start together).

With a ``ServiceHealth`` (workers), every call is retried through an outage
of any length (outage.py). A batch given a ``CommitKey`` is applied once: retried
after an unknown outcome (the connection dropped during COMMIT), it finds its id
recorded and writes nothing again (pgschema_steps.APPLIED_COMMITS); without one, it
stores no page twice but its counters and attempt rows may be added twice.

Batches go in with ``executemany``: psycopg 3 pipelines it, so a commit batch
costs one round trip. Measured on loopback with 6 KB of text per page, 2,000
pages a batch: executemany 110-150 ms, COPY into a temp table then
INSERT ... SELECT 125-215 ms, one INSERT over ``unnest()`` arrays 400-490 ms.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from trawler.config import CrawlConfig, stored_config
from trawler.outage import ServiceHealth, guarded
from trawler.records import Edge, PageRecord, RobotsRecord
from trawler.store import pg_graph
from trawler.store.kinds import (
    DEFAULT_EXPORT_KINDS,
    EXPORT_KINDS,
    ROBOTS,
    ROBOTS_COLUMNS,
    amerge_rows,
    robots_export_row,
)
from trawler.store.pg_dedup import SharedDedup
from trawler.store.pgschema import migrate
from trawler.store.pgstats import read_stats
from trawler.store.sqlite import PAGE_COLUMNS
from trawler.store.sqlite_export import EXPORT_COLUMNS

if TYPE_CHECKING:
    from trawler.store.base import UrlOutcome

T = TypeVar("T")
# More rows a commit writes in the batch's transaction, after its pages.
AlsoWrite = Callable[[psycopg.AsyncCursor], Awaitable[None]]
log = logging.getLogger("trawler")

GETCONN_TIMEOUT_S = 3.0  # then PoolTimeout, an OperationalError: retried in an outage
RECONNECT_TIMEOUT_S = 5.0

JOB_STATES = ("pending", "running", "paused", "cancelled", "finished", "failed")

# A row PostgreSQL (or the client's encoding) will not take, e.g. a number out of
# range: a value of one page. Lost connections and shutdowns are OperationalErrors.
ROW_REJECTED = (psycopg.DataError, psycopg.IntegrityError, ValueError, OverflowError)

# NUL and lone surrogates: PostgreSQL text cannot hold them, SQLite (and scraped HTML) can.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

_INSERT_PAGE = (
    f"INSERT INTO pages (job_id, {', '.join(PAGE_COLUMNS)})"
    f" VALUES ({', '.join(['%s'] * (len(PAGE_COLUMNS) + 1))})"
    " ON CONFLICT (job_id, url) DO NOTHING"
)
_INSERT_ROBOTS = (
    f"INSERT INTO robots_fetches (job_id, {', '.join(ROBOTS_COLUMNS)})"
    f" VALUES ({', '.join(['%s'] * (len(ROBOTS_COLUMNS) + 1))})"
)
_ADD_COUNTER = (
    "INSERT INTO counters (job_id, name, value) VALUES (%s, %s, %s)"
    " ON CONFLICT (job_id, name) DO UPDATE SET value = counters.value + excluded.value"
)
# A total counted elsewhere, exactly (frontier/redis_budget.py): raised, never lowered.
_RAISE_COUNTER = (
    "INSERT INTO counters (job_id, name, value) VALUES (%s, %s, %s)"
    " ON CONFLICT (job_id, name) DO UPDATE SET value = GREATEST(counters.value, excluded.value)"
)
# 1 row when the id is new, 0 when this writer's last commit was this one (applied).
_CLAIM_COMMIT = (
    "INSERT INTO applied_commits (job_id, writer, commit_id) VALUES (%s, %s, %s)"
    " ON CONFLICT (job_id, writer) DO UPDATE SET commit_id = excluded.commit_id"
    " WHERE applied_commits.commit_id <> excluded.commit_id"
)
_PAGE_TOTAL = "SELECT pages FROM page_totals WHERE job_id = %s"
_ADD_SCOPE_HOST = "INSERT INTO job_scope_hosts VALUES (%s, %s) ON CONFLICT DO NOTHING"
_INSERT_ATTEMPT = (
    "INSERT INTO fetch_attempts (job_id, url, attempt, started_at, duration_s, status, error,"
    " decision) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


class PostgresUnavailable(ConnectionError):
    """PostgreSQL cannot be used; the message says why (refused, no such database, …)."""


@dataclass(slots=True, frozen=True)
class CommitKey:
    """One commit's identity, made before its first try: ``writer`` commits one batch
    at a time (a worker's backend of a job), ``commit_id`` is new for each batch."""

    writer: str
    commit_id: str

    @classmethod
    def new(cls, writer: str) -> CommitKey:
        return cls(writer, uuid.uuid4().hex)


@dataclass(slots=True)
class JobInfo:
    """A job as listed: no config (``get_job`` reads one job's)."""

    id: str
    state: str
    created_at: float  # Unix time, seconds
    updated_at: float


def _clean(value: Any) -> Any:
    if not isinstance(value, str) or value.isascii() and "\x00" not in value:
        return value
    return _UNSTORABLE.sub("\ufffd", value)


def _page_row(job_id: str, page: PageRecord) -> tuple:
    return (job_id, *(_clean(value) for value in astuple(page)))


def _counter_rows(job_id: str, counters: dict[str, int]) -> list[tuple[str, str, int]]:
    """Counter upserts in key order (see ``store_batch``)."""
    return [(job_id, name, counters[name]) for name in sorted(counters)]


def _robots_row(job_id: str, record: RobotsRecord) -> tuple:
    return (job_id, *(_clean(value) for value in astuple(record)))


class PostgresStore:
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

    # -- jobs ---------------------------------------------------------------
    async def create_job(self, config: CrawlConfig, state: str = "pending") -> str:
        _check_state(state)
        job_id = uuid.uuid4().hex[:12]

        async def insert() -> None:
            async with self.pool.connection() as conn, conn.transaction():
                await insert_job(conn, job_id, config, state)

        await self._call(insert)
        return job_id

    @contextlib.asynccontextmanager
    async def creating_job(
        self, config: CrawlConfig, state: str = "pending", scope_hosts: Iterable[str] = ()
    ) -> AsyncIterator[str]:
        """A new job's id; its row and its scope (the seeds' hosts) are committed
        only if the ``async with`` body succeeds."""
        _check_state(state)
        job_id = uuid.uuid4().hex[:12]
        async with self.pool.connection() as conn, conn.transaction():
            await insert_job(conn, job_id, config, state)
            async with conn.cursor() as cur:
                await cur.executemany(_ADD_SCOPE_HOST, [(job_id, h) for h in scope_hosts])
            yield job_id

    async def scope_hosts(self, job_id: str) -> list[str]:
        """The hosts of the job's seeds (host keys): its scope."""

        async def select() -> list[Any]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT host FROM job_scope_hosts WHERE job_id = %s", (job_id,)
                )
                return await cur.fetchall()

        return [host for (host,) in await self._call(select)]

    async def add_scope_hosts(self, job_id: str, hosts: Iterable[str]) -> None:
        rows = [(job_id, host) for host in hosts]

        async def insert() -> None:
            async with self.pool.connection() as conn, conn.cursor() as cur:
                await cur.executemany(_ADD_SCOPE_HOST, rows)

        if rows:
            await self._call(insert)

    async def raise_counter(self, job_id: str, name: str, total: int) -> None:
        """Set a counter to ``total`` unless it is already higher."""

        async def upsert() -> None:
            async with self.pool.connection() as conn:
                await conn.execute(_RAISE_COUNTER, (job_id, name, total))

        await self._call(upsert)

    async def get_job(self, job_id: str) -> tuple[CrawlConfig, str]:
        """The job's config and state; KeyError when there is no such job."""

        async def select() -> Any:
            async with self.pool.connection() as conn:
                cur = await conn.execute("SELECT config, state FROM jobs WHERE id = %s", (job_id,))
                return await cur.fetchone()

        row = await self._call(select)
        if row is None:
            raise KeyError(job_id)
        return stored_config(row[0])[0], row[1]

    async def list_jobs(self, states: Sequence[str] | None = None) -> list[JobInfo]:
        """The jobs in ``states`` (all when None), newest first, without their configs."""
        where = "WHERE state = ANY(%s)" if states is not None else ""

        async def select() -> list[Any]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT id, state, extract(epoch FROM created_at)::float8,"
                    f" extract(epoch FROM updated_at)::float8 FROM jobs {where}"
                    " ORDER BY created_at DESC, id",
                    (list(states),) if states is not None else None,
                )
                return await cur.fetchall()

        return [JobInfo(*row) for row in await self._call(select)]

    async def set_job_state(self, job_id: str, state: str) -> None:
        _check_state(state)

        async def update() -> int:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "UPDATE jobs SET state = %s, updated_at = now() WHERE id = %s", (state, job_id)
                )
                return cur.rowcount

        if await self._call(update) == 0:
            raise KeyError(job_id)

    # -- writes -------------------------------------------------------------
    async def insert_pages(self, job_id: str, pages: Iterable[PageRecord]) -> None:
        """Store pages; a (job, URL) already stored is left as it is."""
        await self.store_batch(job_id, pages)

    async def add_counters(self, job_id: str, deltas: dict[str, int]) -> None:
        await self.store_batch(job_id, counters=deltas)

    async def store_batch(
        self,
        job_id: str,
        pages: Iterable[PageRecord] = (),
        counters: dict[str, int] | None = None,
        attempts: Iterable[tuple] = (),
        robots: Iterable[RobotsRecord] = (),
        also: AlsoWrite | None = None,
        commit: CommitKey | None = None,
        dedup: SharedDedup | None = None,
        edges: Mapping[str, Sequence[Edge]] | None = None,
    ) -> int:
        """One commit batch in one transaction: pages (and their ``edges``, by page URL:
        pg_graph.py), counter deltas, fetch attempts, robots.txt downloads, and what
        ``also`` writes last (revisits: dist_revisits.py).
        Returns the job's pages stored after it (with ``commit``; else 0). ``dedup``
        marks the pages' duplicates against the job's stored pages first (pg_dedup.py).

        ``attempts`` rows are (url, attempt, started_at, duration_s, status,
        error, decision), as in ``CommitBatch.attempts``. With ``commit`` the batch
        is applied once however often it is retried; without, a batch retried after
        an unknown outcome may count its counters and attempts twice.
        """
        pages = list(pages)
        # Every worker's batch upserts the same counter rows: in key order, or two
        # transactions can each hold a row the other waits for, and PostgreSQL kills
        # one (a deadlock). Pages need no order: each URL is leased to one worker.
        counter_rows = _counter_rows(job_id, counters or {})
        attempt_rows = [(job_id, *(_clean(value) for value in row)) for row in attempts]
        robots_rows = [_robots_row(job_id, record) for record in robots]

        async def write() -> int:
            async with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                if await _claimed(cur, job_id, commit):
                    if dedup is not None:
                        await dedup.mark(cur, job_id, pages)
                    page_rows = [_page_row(job_id, page) for page in pages]
                    if page_rows:
                        await pg_graph.insert_pages(cur, _INSERT_PAGE, page_rows, job_id,
                                                    edges or {}, _clean)  # fmt: skip
                    for sql, rows in ((_ADD_COUNTER, counter_rows),
                                      (_INSERT_ATTEMPT, attempt_rows),
                                      (_INSERT_ROBOTS, robots_rows)):  # fmt: skip
                        if rows:
                            await cur.executemany(sql, rows)
                    if also is not None:
                        await also(cur)
                return await _page_total(cur, job_id, commit)

        return await self._call(write)

    async def store_outcomes(
        self,
        job_id: str,
        outcomes: Sequence[UrlOutcome],
        counters: dict[str, int],
        robots: Sequence[RobotsRecord] = (),
        also: AlsoWrite | None = None,
        commit: CommitKey | None = None,
        dedup: SharedDedup | None = None,
    ) -> int:
        """A commit batch of URL outcomes in one transaction (``store_batch``, and its
        answer). When a row is rejected, each outcome's rows go in again under a
        savepoint of their own, and one that is rejected is kept as a bare
        ``store_error`` page; a robots.txt row that is rejected is left out (logged)."""
        pages = [o.page for o in outcomes if o.page is not None]
        attempts = [row for o in outcomes for row in o.attempts]
        edges = {o.page.url: o.edges for o in outcomes if o.page is not None and o.edges}
        try:
            return await self.store_batch(
                job_id, pages, counters, attempts, robots, also, commit, dedup, edges
            )
        except ROW_REJECTED:
            pass

        async def one_by_one() -> int:
            async with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                if not await _claimed(cur, job_id, commit):
                    return await _page_total(cur, job_id, commit)
                if dedup is not None:
                    await dedup.mark(cur, job_id, pages)
                for outcome in outcomes:
                    try:
                        async with conn.transaction():
                            await _write_outcome(cur, job_id, outcome)
                        continue
                    except ROW_REJECTED as exc:
                        outcome.store_failed("database", exc)
                    try:
                        async with conn.transaction():
                            await _write_outcome(cur, job_id, outcome)
                    except ROW_REJECTED:  # not even the bare row: the URL ends without one
                        outcome.page, outcome.attempts = None, []
                for record in robots:
                    try:
                        async with conn.transaction():
                            await cur.execute(_INSERT_ROBOTS, _robots_row(job_id, record))
                    except ROW_REJECTED as exc:
                        log.warning("cannot store the row of %s: %s", record.url, exc)
                rows = _counter_rows(job_id, counters)
                if rows:
                    await cur.executemany(_ADD_COUNTER, rows)
                if also is not None:
                    await also(cur)
                return await _page_total(cur, job_id, commit)

        return await self._call(one_by_one)

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


async def _claimed(cur: psycopg.AsyncCursor, job_id: str, commit: CommitKey | None) -> bool:
    """Record the commit's id in its transaction; False when it was applied already."""
    if commit is None:
        return True
    await cur.execute(_CLAIM_COMMIT, (job_id, commit.writer, commit.commit_id))
    return cur.rowcount == 1


async def _page_total(cur: psycopg.AsyncCursor, job_id: str, commit: CommitKey | None) -> int:
    """The job's pages stored, as the transaction sees them (the frontier's budget)."""
    if commit is None:
        return 0
    row = await (await cur.execute(_PAGE_TOTAL, (job_id,))).fetchone()
    return int(row[0]) if row else 0


async def _write_outcome(cur: psycopg.AsyncCursor, job_id: str, outcome: UrlOutcome) -> None:
    if outcome.page is not None:
        row = _page_row(job_id, outcome.page)
        await pg_graph.insert_page(cur, _INSERT_PAGE, row, job_id, outcome.edges, _clean)
    attempts = [(job_id, *(_clean(value) for value in row)) for row in outcome.attempts]
    if attempts:
        await cur.executemany(_INSERT_ATTEMPT, attempts)


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


async def insert_job(
    conn: psycopg.AsyncConnection, job_id: str, config: CrawlConfig, state: str,
    seeding: bool = False,
) -> None:  # fmt: skip
    """A job's row and its creation event (jobs/postgres.py), in the caller's transaction."""
    await conn.execute(
        "INSERT INTO jobs (id, config, state, seeding, started_at)"
        " VALUES (%s, %s::jsonb, %s, %s, CASE WHEN %s THEN now() END)",
        (job_id, config.model_dump_json(), state, seeding, state == "running"),
    )
    await conn.execute(
        "INSERT INTO job_events (job_id, from_state, to_state, at, reason)"
        " VALUES (%s, NULL, %s, extract(epoch FROM now()), 'created')",
        (job_id, state),
    )


def _check_state(state: str) -> None:
    if state not in JOB_STATES:
        raise ValueError(f"job state must be one of {', '.join(JOB_STATES)}, not {state!r}")
