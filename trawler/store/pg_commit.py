"""The writes of a commit batch in PostgreSQL: pages, counters, fetch attempts and
robots.txt downloads of one job, in one transaction.

A page is stored at most once per (job, URL) (``ON CONFLICT DO NOTHING``),
counters are added with an upsert. A batch given a ``CommitKey`` is applied once:
retried after an unknown outcome (the connection dropped during COMMIT), it finds
its id recorded and writes nothing again (pgschema_steps.APPLIED_COMMITS); without
one, it stores no page twice but its counters and attempt rows may be added twice.

Batches go in with ``executemany``: psycopg 3 pipelines it, so a commit batch
costs one round trip. Measured on loopback with 6 KB of text per page, 2,000
pages a batch: executemany 110-150 ms, COPY into a temp table then
INSERT ... SELECT 125-215 ms, one INSERT over ``unnest()`` arrays 400-490 ms.

``BatchWrites`` is a part of ``PostgresStore`` (postgres.py), which builds the
state declared below; its methods are the store's own, not a layer in front of them.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from trawler.records import Edge, PageRecord, RobotsRecord
from trawler.store import pg_graph
from trawler.store.kinds import ROBOTS_COLUMNS
from trawler.store.pg_dedup import SharedDedup
from trawler.store.sqlite import PAGE_COLUMNS

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from trawler.store.base import UrlOutcome

# More rows a commit writes in the batch's transaction, after its pages.
AlsoWrite = Callable[[psycopg.AsyncCursor], Awaitable[None]]
log = logging.getLogger("trawler")

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
_INSERT_ATTEMPT = (
    "INSERT INTO fetch_attempts (job_id, url, attempt, started_at, duration_s, status, error,"
    " decision) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


@dataclass(slots=True, frozen=True)
class CommitKey:
    """One commit's identity, made before its first try: ``writer`` commits one batch
    at a time (a worker's backend of a job), ``commit_id`` is new for each batch."""

    writer: str
    commit_id: str

    @classmethod
    def new(cls, writer: str) -> CommitKey:
        return cls(writer, uuid.uuid4().hex)


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


class BatchWrites:
    """Pages, counters, attempts and robots.txt rows of a job, a batch a transaction
    (module doc)."""

    # PostgresStore's pool and its retried call (postgres.py).
    pool: AsyncConnectionPool
    _call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

    async def insert_pages(self, job_id: str, pages: Iterable[PageRecord]) -> None:
        """Store pages; a (job, URL) already stored is left as it is."""
        await self.store_batch(job_id, pages)

    async def add_counters(self, job_id: str, deltas: dict[str, int]) -> None:
        await self.store_batch(job_id, counters=deltas)

    async def raise_counter(self, job_id: str, name: str, total: int) -> None:
        """Set a counter to ``total`` unless it is already higher."""

        async def upsert() -> None:
            async with self.pool.connection() as conn:
                await conn.execute(_RAISE_COUNTER, (job_id, name, total))

        await self._call(upsert)

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
