"""The embedded database's schema: the tables a new data directory gets, and the
steps that bring the database of an older Trawler up to them.

Each step is idempotent (it looks before it changes: ``has_column``, the table's SQL)
and runs on every writable open, in the order sqlite.connect calls them. Later
features keep their tables in modules of their own (sqlite_totals.py, versions.py,
sqlite_graph.py, sqlite_provenance.py, ...), which sqlite.connect calls too.
"""

from __future__ import annotations

import sqlite3

# URL states in the `urls` table. DEAD: dead-lettered, its retries spent (5xx, 429, 503).
QUEUED, DONE, SKIPPED, DEAD = 0, 1, 2, 3

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


# Uncorrelated: SQLite builds the set of sitemap URLs once, then probes it per row.
IS_LISTED_SITEMAP = "url IN (SELECT url FROM urls WHERE kind = 'sitemap')"


def has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(sql, (table,)).fetchone() is not None


def migrate_urls(conn: sqlite3.Connection) -> None:
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


def add_page_kinds(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before kinds: sitemaps are named by `urls.kind`."""
    if has_column(conn, "pages", "kind"):
        return
    with conn:
        conn.execute("ALTER TABLE pages ADD COLUMN kind TEXT NOT NULL DEFAULT 'page'")
        conn.execute(f"UPDATE pages SET kind = 'sitemap' WHERE {IS_LISTED_SITEMAP}")


def add_changefreq(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before sitemap <changefreq> was kept (issue 15)."""
    with conn:
        if not has_column(conn, "urls", "changefreq"):
            conn.execute("ALTER TABLE urls ADD COLUMN changefreq TEXT")
        if not has_column(conn, "pages", "sitemap_changefreq"):
            conn.execute("ALTER TABLE pages ADD COLUMN sitemap_changefreq TEXT")


def add_rendered(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before JavaScript rendering (issue 16)."""
    if not has_column(conn, "pages", "rendered"):
        with conn:
            conn.execute("ALTER TABLE pages ADD COLUMN rendered TEXT")


RESERVATION_COLUMNS = {
    "tdm_reservation": "INTEGER", "tdm_policy": "TEXT", "tdm_source": "TEXT",
    "ai_robots_groups": "TEXT", "ai_robots_disallowed": "TEXT",
}  # fmt: skip


def add_reservations(conn: sqlite3.Connection) -> None:
    """Migrate a data directory from before reuse reservations (issue 18, tdmrep.py)."""
    missing = [c for c in RESERVATION_COLUMNS if not has_column(conn, "pages", c)]
    if missing:
        with conn:
            for column in missing:
                conn.execute(f"ALTER TABLE pages ADD COLUMN {column} {RESERVATION_COLUMNS[column]}")
