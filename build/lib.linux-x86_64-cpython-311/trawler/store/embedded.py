"""The embedded backend: SQLite for frontier and metadata, WARC files for content.

``commit()`` is the crawl's commit point (docs/architecture.md): the WARC
records of a batch are written and fsynced first, then one SQLite
transaction stores the pages, the newly discovered URLs, the URLs done or
skipped, and the WARC files' committed sizes. A URL is acknowledged only
when that transaction returns. A kill before it loses nothing: the batch's
URLs are still queued in the database and are fetched again on resume;
WARC bytes written after the last committed size are cut off on restart.

Inside the transaction each URL's outcome is written whole or not at all:
when a row of the batch is rejected, the batch's rows are written again one
outcome at a time, each in its own savepoint, and an outcome whose rows are
rejected is written as a bare ``store_error`` page (``UrlOutcome.store_failed``).

The blocking work runs on one writer thread owned by the backend; the
async methods are what the engine calls. WAL checkpoints run on a thread of
their own (checkpoint.py), not inside the commits.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trawler import __version__
from trawler.config import CrawlConfig
from trawler.dedup import ContentDedup
from trawler.frontier.importance import priority_options
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy, unproven_limit
from trawler.store import search, sqlite_graph, sqlite_provenance
from trawler.store import sqlite as db
from trawler.store.base import DEAD, RETRY, SKIPPED, CommitBatch, UrlOutcome, archive_batch
from trawler.store.checkpoint import BACKSTOP_PAGES, Checkpointer
from trawler.store.warc import WarcWriter, recover

if TYPE_CHECKING:
    from trawler.recrawl import RevisitWindow
    from trawler.recrawl_store import RecrawlStore
    from trawler.store.versions import RevisitState

WARC_DIR = "warc"
# Rows a transaction: a larger batch is committed in chunks, each scheduled once durable.
COMMIT_CHUNK_ITEMS = 4000
# The writer's page cache (SQLite's default is 2 MiB). Each commit touches a leaf or
# two of every host it holds in `urls` (clustered by host), of the pages' url index
# and of the search index: on a crawl of thousands of hosts that working set outgrows
# 2 MiB, and every commit read it back from the file (bench/RESULTS.md, session 33).
WRITER_CACHE_KIB = 16 * 1024
log = logging.getLogger("trawler")
T = TypeVar("T")


class EmbeddedBackend:
    """Owns the data directory: database connection, frontier, WARC writer."""

    def __init__(self, data_dir: Path, on_seeds_added: Callable[[], None] | None = None) -> None:
        """``data_dir``: the job's directory; ``on_seeds_added`` runs on the writer
        thread once the run's seeds are all in (the job registry's seeding flag)."""
        self.data_dir = data_dir
        self.on_seeds_added = on_seeds_added
        self.conn: sqlite3.Connection = db.connect(data_dir)
        self.conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        self.conn.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")  # negative: KiB
        self.checkpointer = Checkpointer(data_dir / db.DB_NAME)
        self.store = db.SqliteStore(self.conn)
        self.frontier: SqliteFrontier | None = None
        self.warc: WarcWriter | None = None
        self.dedup = ContentDedup()
        self.revisits: RecrawlStore | None = None  # open_revisits(): this run revisits pages
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="trawler-writer")

    async def _in_writer(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    async def open(self, config: CrawlConfig) -> SqliteFrontier:
        """Load (or resume) the crawl; returns its frontier."""
        return await self._in_writer(self._open, config)

    async def commit(self, batch: CommitBatch) -> None:
        """The commit point; then schedule the new URLs and acknowledge the leases.

        A batch of more than ``COMMIT_CHUNK_ITEMS`` rows is committed in chunks, each
        a transaction of whole outcomes whose URLs are scheduled as soon as it is
        durable: the hosts of the first chunks get their next URLs without waiting
        for the last (one 34,054-row transaction held every host for 2.7 s)."""
        assert self.frontier is not None
        # Host and robots.txt state noted up to now go with this batch, whose WARC
        # records they match (restart_state.py); later notes wait for the next one.
        # The first chunk writes them, with the batch's robots.txt records.
        mark = self.frontier.restart_mark()
        for chunk in batch.chunks(COMMIT_CHUNK_ITEMS):
            await self._in_writer(self._commit, chunk, mark)
            mark = (0, 0)
            self.frontier.enqueue(chunk.all_new_requests())
            if chunk.revisits:
                self.frontier.revisits_done([outcome.state.url for outcome in chunk.revisits])
            self.frontier.ack(chunk.acked)

    # -- revisits (issue 15; recrawl_store.py does the work) --------------------------
    async def open_revisits(self, window: RevisitWindow) -> None:
        await self._in_writer(self._open_revisits, window)

    def _open_revisits(self, window: RevisitWindow) -> None:
        from trawler.recrawl_store import RecrawlStore

        config_max = self.warc.max_bytes if self.warc is not None else None
        self.revisits = RecrawlStore(self.conn, self.data_dir, window, config_max or 2**30)
        self.revisits.seed()

    async def due_revisits(self, now: float, limit: int) -> list[tuple[RevisitState, int]]:
        assert self.revisits is not None
        return await self._in_writer(self.revisits.due, now, limit)

    async def pass_revisits(self, limit: int) -> list[tuple[RevisitState, int]]:
        assert self.revisits is not None
        return await self._in_writer(self.revisits.next_of_pass, limit)

    async def host_url_counts(self) -> dict[str, int]:
        return await self._in_writer(self.store.host_url_counts)

    async def scope_hosts(self) -> list[str]:
        return await self._in_writer(self.store.scope_hosts)

    async def add_scope_hosts(self, hosts: list[str]) -> None:
        await self._in_writer(self.store.add_scope_hosts, hosts)

    async def seeds_added(self) -> None:
        await self._in_writer(self.store.seeds_added)
        if self.on_seeds_added is not None:
            await self._in_writer(self.on_seeds_added)

    async def close(self) -> None:
        try:
            await self._in_writer(self._close)
        finally:
            self._writer.shutdown()

    def _open(self, config: CrawlConfig) -> SqliteFrontier:
        """Repair WARC files left by a crash, load the frontier, open a WARC file."""
        warc_dir = self.data_dir / WARC_DIR
        warc_dir.mkdir(parents=True, exist_ok=True)
        recover(warc_dir, self.store.warc_positions())
        policy = PolitenessPolicy.from_config(config)
        self.frontier = SqliteFrontier(
            policy, unproven_limit=unproven_limit(config.concurrency), **priority_options(config)
        )
        self.frontier.load(self.conn)
        sqlite_graph.pause_index(self.conn)  # built again at close (sqlite_graph.py)
        self.dedup = ContentDedup(config.near_duplicate_bits)
        self.dedup.load(self.store.content_fingerprints())
        self.warc = WarcWriter(
            warc_dir, max_bytes=config.warc_max_bytes, software=f"Trawler/{__version__}"
        )
        return self.frontier

    def _commit(self, batch: CommitBatch, mark: tuple[int, int]) -> None:
        assert self.warc is not None and self.frontier is not None
        archive_batch(batch, self.warc, self.dedup)
        if batch.revisits:
            assert self.revisits is not None
            self.revisits.archive(batch.revisits)
        with self.conn:  # one transaction: the commit point
            if not self.conn.in_transaction:
                self.conn.execute("BEGIN")  # savepoints nest in it, RELEASE commits nothing
            first_new_id = search.last_page_id(self.conn)
            self.frontier.persist_new(self.conn, batch.new_requests)
            self._store_robots(batch)
            self._store_outcomes(batch.outcomes)
            if batch.revisits:
                assert self.revisits is not None
                self.revisits.record(batch.revisits, self.store)
                self.frontier.persist_new(
                    self.conn, [r for outcome in batch.revisits for r in outcome.discovered]
                )
            search.index_pages_after(self.conn, first_new_id)  # searchable as stored
            if batch.counters:
                self.store.add_counters(batch.counters)
            position = self.warc.position()
            if position is not None:
                self.store.set_warc_position(*position)
            self.frontier.persist_hosts(self.conn, mark)
        self.checkpointer.committed()

    def _store_robots(self, batch: CommitBatch) -> None:
        """The batch's robots.txt rows; one the database rejects is left out, logged."""
        records = batch.robots_records
        try:
            with _savepoint(self.conn):
                self.store.insert_robots(records)
            return
        except db.ROW_REJECTED:
            pass
        for record in records:
            try:
                with _savepoint(self.conn):
                    self.store.insert_robots([record])
            except db.ROW_REJECTED as exc:
                log.warning("cannot store the row of %s: %s", record.url, exc)

    def _store_outcomes(self, outcomes: list[UrlOutcome]) -> None:
        """All outcomes at once; one at a time when a row is rejected, to find its page."""
        try:
            with _savepoint(self.conn):
                self._write(outcomes)
            return
        except db.ROW_REJECTED:
            pass
        for outcome in outcomes:
            try:
                with _savepoint(self.conn):
                    self._write([outcome])
                continue
            except db.ROW_REJECTED as exc:
                outcome.store_failed("database", exc)
            try:
                with _savepoint(self.conn):
                    self._write([outcome])
            except db.ROW_REJECTED:  # not even the bare row: finish the URL without one
                outcome.page, outcome.attempts = None, []
                self._write([outcome])

    def _write(self, outcomes: list[UrlOutcome]) -> None:
        """The rows of these outcomes: pages and their edges, attempts, links found,
        URL states."""
        assert self.frontier is not None
        conn = self.conn
        after_id = sqlite_graph.last_page_id(conn)
        self.store.insert_pages([o.page for o in outcomes if o.page is not None])
        sqlite_graph.insert_edges(conn, outcomes, after_id)
        self.store.insert_attempts([row for o in outcomes for row in o.attempts])
        self.frontier.persist_new(conn, [r for o in outcomes for r in o.discovered])
        sqlite_provenance.write(conn, outcomes)
        fetched = [o for o in outcomes if o.state not in (SKIPPED, RETRY)]
        self.frontier.persist_done(
            conn,
            [(o.request, o.state == DEAD) for o in fetched],
            [(o.request, o.reason or "") for o in outcomes if o.state == SKIPPED],
        )

    def _close(self) -> None:
        try:
            if self.frontier is not None:
                self.frontier.persist_stopped(self.conn)
                self.frontier.persist_closing(self.conn)
                sqlite_graph.build_index(self.conn)
        finally:
            if self.warc is not None:
                self.warc.close()
            if self.revisits is not None:
                self.revisits.close()
            self.checkpointer.close()
            self.conn.close()


@contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """A nested transaction: on an exception its writes are undone, the outer one goes on."""
    conn.execute("SAVEPOINT outcome")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO outcome")
        conn.execute("RELEASE outcome")
        raise
    conn.execute("RELEASE outcome")
