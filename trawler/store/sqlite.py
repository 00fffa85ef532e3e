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
from trawler.store.sqlite_totals import add_totals, count_inserted_pages
from trawler.store.versions import ensure_versions_schema
from trawler.tdmrep import KEPT_PROFILE_SUFFIX
from trawler.urls import seed_hosts

DB_NAME = "trawler.db"

# URL states in the `urls` table. DEAD: dead-lettered, its retries spent (5xx, 429, 503).
QUEUED, DONE, SKIPPED, DEAD = 0, 1, 2, 3

# A row the database (or its Python binding) will not take: a value of one page,
# not a fault of the store (those are sqlite3.OperationalError: disk I/O, full, locked).
ROW_REJECTED = (
    ValueError, OverflowError, TypeError, sqlite3.IntegrityError, sqlite3.DataError,
    sqlite3.ProgrammingError, sqlite3.InterfaceError,
)  # fmt: skip

PAGE_COLUMNS = tuple(f.name for f in fields(PageRecord))
_page_row = attrgetter(*PAGE_COLUMNS)  # a flat tuple; dataclasses.astuple deep-copies
_robots_row = attrgetter(*ROBOTS_COLUMNS)

# Clustered by host, then crawl order: a host's queue is one range of the table, a new
# URL is appended to its host's range (a key of random fingerprints scattered every
# insert over the whole table). ``seq`` grows with every URL: the seen set saved
# up to a seq reads only the rows after it (index urls_seq).
URLS_TABLE = f"""CREATE TABLE IF NOT EXISTS urls (
    host TEXT NOT NULL,
    depth INTEGER NOT NULL,
    seq INTEGER NOT NULL,           -- discovery order
    fp INTEGER NOT NULL,            -- 64-bit fingerprint of the normalised URL: the seen set
    url TEXT NOT NULL,
    parent_url TEXT,
    state INTEGER NOT NULL DEFAULT {QUEUED},
    attempts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,                    -- why a URL was skipped (robots, ...)
    kind TEXT NOT NULL DEFAULT 'page', -- page or sitemap
    lastmod TEXT,                   -- <lastmod> of the sitemap entry that listed it
    changefreq TEXT,                -- <changefreq> of that entry (sitemaps.CHANGEFREQS)
    PRIMARY KEY (host, depth, seq)
) WITHOUT ROWID;"""

# Per-host counts kept in each commit: a resume reads them, not the URLs.
HOST_QUEUES_TABLE = """CREATE TABLE IF NOT EXISTS host_queues (
    host TEXT PRIMARY KEY,
    queued INTEGER NOT NULL,        -- URLs queued (state 0)
    admitted INTEGER NOT NULL       -- URLs not skipped (for --max-pages-per-host)
);"""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    state TEXT NOT NULL,            -- seeding, running, stopped, finished
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
{URLS_TABLE}
CREATE INDEX IF NOT EXISTS urls_seq ON urls(seq, fp);
{HOST_QUEUES_TABLE}
CREATE TABLE IF NOT EXISTS pages (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    final_url TEXT, status INTEGER, content_type TEXT, content_length INTEGER,
    depth INTEGER, parent_url TEXT, title TEXT, description TEXT, keywords TEXT,
    text TEXT, links_count INTEGER, content_sha256 TEXT, fetched_at REAL,
    fetch_duration_s REAL, error TEXT, warc_file TEXT, warc_offset INTEGER,
    canonical TEXT, noindex INTEGER, attempts INTEGER,
    host TEXT, duplicate_of TEXT, simhash TEXT, text_hash TEXT, sitemap_lastmod TEXT,
    kind TEXT NOT NULL DEFAULT 'page', -- page or sitemap (store/kinds.py)
    sitemap_changefreq TEXT,        -- <changefreq> of the sitemap entry that listed it
    rendered TEXT,                  -- the --render decision (render/shell.py); NULL: never
    tdm_reservation INTEGER, tdm_policy TEXT, tdm_source TEXT, -- TDMRep (tdmrep.py)
    ai_robots_groups TEXT, ai_robots_disallowed TEXT -- the host's AI crawlers' groups
);
CREATE TABLE IF NOT EXISTS robots_fetches ( -- every robots.txt download, archived in the WARC
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL, final_url TEXT, status INTEGER, content_type TEXT,
    content_length INTEGER, content_sha256 TEXT, fetched_at REAL, fetch_duration_s REAL,
    error TEXT, host TEXT, warc_file TEXT, warc_offset INTEGER
);
CREATE TABLE IF NOT EXISTS fetch_attempts (  -- every fetch attempt, retried ones included
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    started_at REAL,
    duration_s REAL,
    status INTEGER,
    error TEXT,
    decision TEXT                   -- done, retry, fail, dead
);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,          -- e.g. rejected.out_of_scope, robots.fetched
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS warc_files (
    name TEXT PRIMARY KEY,
    committed_bytes INTEGER NOT NULL -- size of the file at the last commit
);
-- Kept across restarts (frontier/restart_state.py); times are wall-clock seconds.
CREATE TABLE IF NOT EXISTS hosts (
    host TEXT PRIMARY KEY,
    last_sent_at REAL,              -- when the last request's headers left
    next_allowed_at REAL NOT NULL,  -- no request may start before this
    crawl_delay_s REAL,             -- from robots.txt, already capped
    backoff_s REAL NOT NULL,        -- extra interval after 429/503
    failures INTEGER NOT NULL,      -- consecutive failures
    paused_until REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS robots (
    site TEXT NOT NULL,             -- origin: scheme://host:port
    profile TEXT NOT NULL,          -- Fetcher.profile of the fetch (headers, reach)
    status INTEGER, error TEXT, body BLOB NOT NULL,
    fetched_at REAL NOT NULL,
    failures INTEGER NOT NULL,      -- consecutive unavailable answers
    PRIMARY KEY (site, profile)
);
-- --render auto: a host's renders in a row that added nothing (render/shell.py).
CREATE TABLE IF NOT EXISTS render_hosts (host TEXT PRIMARY KEY, misses INTEGER NOT NULL);
-- The hosts of the job's seeds (host keys): its scope, rebuilt from here on resume.
CREATE TABLE IF NOT EXISTS scope_hosts (host TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS frontier_state (
    name TEXT PRIMARY KEY,          -- run: running, or stopped (cleanly)
    value TEXT NOT NULL
);
"""


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
    _migrate_urls(conn)
    conn.executescript(f"BEGIN; {SCHEMA} COMMIT;")  # one transaction: the WAL holds one copy
    ensure_search_schema(conn)
    _add_page_kinds(conn)
    _add_changefreq(conn)
    _add_rendered(conn)
    _add_reservations(conn)
    add_totals(conn)  # the dashboard's totals and indexes (issue 13)
    ensure_versions_schema(conn)  # page versions and revisits (issue 15)
    ensure_graph_schema(conn)  # the link graph (issue 18)
    add_provenance(conn)  # why each URL was fetched or left out (issue 18)
    conn.commit()
    if fresh:  # the schema's ~210 kB of WAL frames into the file: the WAL starts empty
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def _add_page_kinds(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before kinds: sitemaps are named by `urls.kind`."""
    if has_column(conn, "pages", "kind"):
        return
    with conn:
        conn.execute("ALTER TABLE pages ADD COLUMN kind TEXT NOT NULL DEFAULT 'page'")
        conn.execute(f"UPDATE pages SET kind = 'sitemap' WHERE {IS_LISTED_SITEMAP}")


def _add_changefreq(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before sitemap <changefreq> was kept (issue 15)."""
    with conn:
        if not has_column(conn, "urls", "changefreq"):
            conn.execute("ALTER TABLE urls ADD COLUMN changefreq TEXT")
        if not has_column(conn, "pages", "sitemap_changefreq"):
            conn.execute("ALTER TABLE pages ADD COLUMN sitemap_changefreq TEXT")


def _add_rendered(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before JavaScript rendering (issue 16)."""
    if not has_column(conn, "pages", "rendered"):
        with conn:
            conn.execute("ALTER TABLE pages ADD COLUMN rendered TEXT")


RESERVATION_COLUMNS = {
    "tdm_reservation": "INTEGER", "tdm_policy": "TEXT", "tdm_source": "TEXT",
    "ai_robots_groups": "TEXT", "ai_robots_disallowed": "TEXT",
}  # fmt: skip


def _add_reservations(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before reuse reservations (issue 18, tdmrep.py)."""
    missing = [c for c in RESERVATION_COLUMNS if not has_column(conn, "pages", c)]
    if missing:
        with conn:
            for column in missing:
                conn.execute(f"ALTER TABLE pages ADD COLUMN {column} {RESERVATION_COLUMNS[column]}")


# The kept robots.txt files of the `robots` table, without the tdmrep.json fetches kept
# beside them (tdmgate.py).
ROBOTS_TXT_ONLY = f"profile NOT LIKE '%{KEPT_PROFILE_SUFFIX}'"


# Uncorrelated: SQLite builds the set of sitemap URLs once, then probes it per row.
IS_LISTED_SITEMAP = "url IN (SELECT url FROM urls WHERE kind = 'sitemap')"


def has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(sql, (table,)).fetchone() is not None


def _migrate_urls(conn: sqlite3.Connection) -> None:
    """A data directory of an older version keyed ``urls`` by fingerprint: rewrite it
    clustered by host (once, in one transaction) and count each host's queue."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'urls'").fetchone()
    if row is None or "WITHOUT ROWID" in row[0]:
        return
    columns = "host, depth, fp, url, parent_url, state, attempts, reason, kind, lastmod"
    with conn:
        conn.execute("BEGIN")  # DDL included: all of it or nothing
        conn.execute("ALTER TABLE urls RENAME TO urls_v1")
        conn.execute("DROP INDEX IF EXISTS urls_queued")
        conn.execute(URLS_TABLE)
        conn.execute(
            f"INSERT INTO urls (seq, {columns}) SELECT row_number() OVER (ORDER BY rowid),"
            f" {columns} FROM urls_v1"
        )
        conn.execute(HOST_QUEUES_TABLE)
        conn.execute(
            f"INSERT INTO host_queues SELECT host, sum(state = {QUEUED}),"
            f" sum(state != {SKIPPED}) FROM urls GROUP BY host"
        )
        conn.execute("DROP TABLE urls_v1")


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
