"""The embedded store: one SQLite database (WAL) per data directory.

It holds the job and its config, the frontier's durable side (every URL
ever discovered, keyed by its 64-bit fingerprint, with its state) and the
page metadata. The frontier and the page store share one connection so that
a commit of pages, discovered links and acknowledgements is one transaction:
that transaction is the crawl's commit point (docs/architecture.md).

All methods run on the backend's single writer thread. The read side of
`trawler export` and `trawler stats` is in sqlite_export.py, on a read-only
connection of its own.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import fields
from operator import attrgetter
from pathlib import Path

from trawler.config import CrawlConfig, stored_config
from trawler.records import PageRecord, RobotsRecord
from trawler.store.kinds import (
    ROBOTS_COLUMNS,
)
from trawler.store.search import ensure_search_schema
from trawler.store.sqlite_graph import ensure_graph_schema
from trawler.store.sqlite_provenance import add_provenance
from trawler.store.sqlite_schema import (  # the URL states, has_table: many import them here
    DEAD,  # noqa: F401
    DONE,  # noqa: F401
    QUEUED,  # noqa: F401
    SCHEMA,
    SKIPPED,  # noqa: F401
    add_changefreq,
    add_page_kinds,
    add_rendered,
    add_reservations,
    has_table,  # noqa: F401
    migrate_urls,
)
from trawler.store.sqlite_totals import add_totals, count_inserted_pages
from trawler.store.versions import ensure_versions_schema
from trawler.tdmrep import KEPT_PROFILE_SUFFIX
from trawler.urls import seed_hosts

DB_NAME = "trawler.db"

# A row the database (or its Python binding) will not take: a value of one page,
# not a fault of the store (those are sqlite3.OperationalError: disk I/O, full, locked).
ROW_REJECTED = (
    ValueError, OverflowError, TypeError, sqlite3.IntegrityError, sqlite3.DataError,
    sqlite3.ProgrammingError, sqlite3.InterfaceError,
)  # fmt: skip

PAGE_COLUMNS = tuple(f.name for f in fields(PageRecord))
_page_row = attrgetter(*PAGE_COLUMNS)  # a flat tuple; dataclasses.astuple deep-copies
_robots_row = attrgetter(*ROBOTS_COLUMNS)


class NotTrawlerData(RuntimeError):
    """The data directory's database is corrupt or belongs to another program."""


# Tables every Trawler database has; more may come with later versions.
CORE_TABLES = frozenset({"jobs", "urls", "pages"})


def _check_ours(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
    """Refuse a file that is not a database, or another program's database: reading
    it would fail half-way, and writing would add our tables to someone else's data.
    A writer completes a schema of ours that a kill cut short. To a reader, a file
    with no table yet is no crawl data yet (FileNotFoundError): the schema comes in
    one transaction, so a reader sees all of it or none."""
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise NotTrawlerData(f"{path} is not a Trawler database ({exc})") from None
    names = {row[0] for row in rows}
    if readonly and not names:  # a crawl's first connection, before its schema
        conn.close()
        raise FileNotFoundError(f"no crawl data in {path.parent} yet ({path.name} has no tables)")
    missing = CORE_TABLES - names
    if missing and (readonly or names and missing == CORE_TABLES):
        conn.close()
        raise NotTrawlerData(
            f"{path} is not a Trawler database (no {', '.join(sorted(missing))} table)"
        )


def connect(data_dir: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the data directory's database; create the schema when writable.

    Raises ``NotTrawlerData`` for a corrupt file or another program's database.
    """
    path = data_dir / DB_NAME
    if readonly:
        if not path.exists():
            raise FileNotFoundError(f"no crawl data in {data_dir} (missing {DB_NAME})")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        _check_ours(conn, path, readonly=True)
        conn.row_factory = sqlite3.Row
        return conn
    data_dir.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level="DEFERRED")
    _check_ours(conn, path, readonly=False)
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit is on disk when it returns, so an acknowledged page survives
    # a power cut too, not only kill -9 (one fsync per group commit, not per page).
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    migrate_urls(conn)
    conn.executescript(f"BEGIN; {SCHEMA} COMMIT;")  # one transaction: the WAL holds one copy
    ensure_search_schema(conn)
    add_page_kinds(conn)
    add_changefreq(conn)
    add_rendered(conn)
    add_reservations(conn)
    add_totals(conn)  # the dashboard's totals and indexes (issue 13)
    ensure_versions_schema(conn)  # page versions and revisits (issue 15)
    ensure_graph_schema(conn)  # the link graph (issue 18)
    add_provenance(conn)  # why each URL was fetched or left out (issue 18)
    conn.commit()
    if fresh:  # the schema's ~210 kB of WAL frames into the file: the WAL starts empty
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


# The kept robots.txt files of the `robots` table, without the tdmrep.json fetches kept
# beside them (tdmgate.py).
ROBOTS_TXT_ONLY = f"profile NOT LIKE '%{KEPT_PROFILE_SUFFIX}'"


class SqliteStore:
    """Jobs, page metadata and counters in the embedded database."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # -- jobs ---------------------------------------------------------------
    def current_job(self) -> tuple[str, CrawlConfig, str] | None:
        row = self.conn.execute(
            "SELECT id, config, state FROM jobs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        config, legacy_seeds = stored_config(row[1])
        if legacy_seeds:  # a job of an older Trawler: its seeds become its scope, once
            self.add_scope_hosts(seed_hosts(legacy_seeds))
            self.update_job(row[0], config=config)
        return row[0], config, row[2]

    def seeds_added(self) -> None:
        """A job's new seeds are all in the frontier: it is no longer ``seeding``."""
        self.conn.execute(
            "UPDATE jobs SET state = 'running', updated_at = ? WHERE state = 'seeding'",
            (time.time(),),
        )
        self.conn.commit()

    def end_run(self, job_id: str, state: str) -> None:
        """A run's end state (stopped, finished), unless it stopped while adding seeds:
        those are not all in, and the next run must be given them again."""
        self.conn.execute(
            "UPDATE jobs SET state = ?, updated_at = ? WHERE id = ? AND state != 'seeding'",
            (state, time.time(), job_id),
        )
        self.conn.commit()

    def scope_hosts(self) -> list[str]:
        """The hosts of the job's seeds (host keys): its scope."""
        return [host for (host,) in self.conn.execute("SELECT host FROM scope_hosts")]

    def add_scope_hosts(self, hosts: Iterable[str]) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO scope_hosts VALUES (?)", [(host,) for host in hosts]
        )
        self.conn.commit()

    def create_job(
        self, config: CrawlConfig, state: str = "running", job_id: str | None = None
    ) -> str:
        """The job's row in its own database (``job_id``: its id in the registry, jobs/)."""
        job_id = job_id or uuid.uuid4().hex[:12]
        now = time.time()
        self.conn.execute(
            "INSERT INTO jobs VALUES (?, ?, ?, ?, ?)",
            (job_id, config.model_dump_json(), state, now, now),
        )
        self.conn.commit()
        return job_id

    def update_job(
        self, job_id: str, config: CrawlConfig | None = None, state: str | None = None
    ) -> None:
        if config is not None:
            self.conn.execute(
                "UPDATE jobs SET config = ? WHERE id = ?", (config.model_dump_json(), job_id)
            )
        if state is not None:
            self.conn.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE id = ?",
                (state, time.time(), job_id),
            )
        self.conn.commit()

    # -- writes (inside the caller's transaction) -----------------------------
    def insert_pages(self, pages: list[PageRecord]) -> None:
        if not pages:
            return
        placeholders = ", ".join("?" for _ in PAGE_COLUMNS)
        after_id = self.conn.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0]
        # Exactly-once storing: a URL already stored is never stored twice.
        cursor = self.conn.executemany(
            f"INSERT INTO pages ({', '.join(PAGE_COLUMNS)}) VALUES ({placeholders})"
            " ON CONFLICT(url) DO NOTHING",
            map(_page_row, pages),  # rows made in C as SQLite asks for them: no list, no frame
        )
        count_inserted_pages(self.conn, pages, cursor.rowcount, after_id)

    def insert_robots(self, records: list[RobotsRecord]) -> None:
        """A row per robots.txt download (several per URL: retries, refetches)."""
        placeholders = ", ".join("?" for _ in ROBOTS_COLUMNS)
        self.conn.executemany(
            f"INSERT INTO robots_fetches ({', '.join(ROBOTS_COLUMNS)}) VALUES ({placeholders})",
            map(_robots_row, records),
        )

    def insert_attempts(self, attempts: list[tuple]) -> None:
        """(url, attempt, started_at, duration_s, status, error, decision) rows."""
        self.conn.executemany(
            "INSERT INTO fetch_attempts (url, attempt, started_at, duration_s, status, error,"
            " decision) VALUES (?, ?, ?, ?, ?, ?, ?)",
            attempts,
        )

    def add_counters(self, deltas: dict[str, int]) -> None:
        self.conn.executemany(
            "INSERT INTO counters VALUES (?, ?)"
            " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            list(deltas.items()),
        )

    def set_warc_position(self, name: str, size: int) -> None:
        self.conn.execute(
            "INSERT INTO warc_files VALUES (?, ?)"
            " ON CONFLICT(name) DO UPDATE SET committed_bytes = excluded.committed_bytes",
            (name, size),
        )

    def host_url_counts(self) -> dict[str, int]:
        """URLs admitted per host (for --max-pages-per-host after a resume)."""
        return dict(self.conn.execute("SELECT host, admitted FROM host_queues"))

    def content_fingerprints(self) -> Iterator[tuple[str, str | None, str | None, bytes | None]]:
        """(url, text_hash, simhash, minhash) of stored original pages, to rebuild
        duplicate detection (minhash is None in rows stored before sketches existed)."""
        return iter(self.conn.execute(
            "SELECT url, text_hash, simhash, minhash FROM pages"
            " WHERE duplicate_of IS NULL AND simhash IS NOT NULL ORDER BY id"
        ))  # fmt: skip

    def warc_positions(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT name, committed_bytes FROM warc_files"))
