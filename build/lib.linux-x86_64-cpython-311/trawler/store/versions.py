"""Page versions and revisit state in the embedded database (issue 15).

Three tables beside ``pages``, created with the schema (sqlite.connect) like every
other table, so a data directory of an older version gains them on its next open:

- ``revisit_state``: one row per revisited page: its validators (ETag,
  Last-Modified), the hashes of its latest version, its estimated change rate
  and when it is due.
- ``page_versions``: the content history. Version 1 is the page as the crawl
  stored it; each revisit that finds a changed body adds the next version.
- ``visits``: one row per revisit, changed or not: what the estimator reads.

``pages`` keeps the page as the crawl first stored it: its text is indexed by the
external-content FTS table (search.py), which an UPDATE of the row would leave
pointing at words no longer there. The latest version is read from here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from trawler.outcome import NOT_HTML

VERSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS revisit_state (
    url TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    final_url TEXT NOT NULL,        -- of the latest version: WARC-Refers-To-Target-URI
    etag TEXT, last_modified TEXT,  -- validators of the latest 2xx answer
    content_sha256 TEXT, simhash TEXT,
    version INTEGER NOT NULL,       -- the latest version's number
    version_at REAL NOT NULL,       -- when it was fetched: WARC-Refers-To-Date
    last_visit_at REAL NOT NULL,
    next_visit_at REAL NOT NULL,    -- wall clock
    rate_per_s REAL NOT NULL        -- estimated changes per second (recrawl.py)
);
CREATE INDEX IF NOT EXISTS revisit_due ON revisit_state(next_visit_at);
CREATE TABLE IF NOT EXISTS page_versions (
    url TEXT NOT NULL,
    version INTEGER NOT NULL,       -- 1: the page as the crawl stored it
    fetched_at REAL NOT NULL, final_url TEXT, status INTEGER, content_type TEXT,
    content_length INTEGER, content_sha256 TEXT, simhash TEXT,
    distance INTEGER,               -- SimHash bits from the version before (NULL for 1)
    title TEXT, text TEXT, etag TEXT, last_modified TEXT,
    warc_file TEXT, warc_offset INTEGER,
    PRIMARY KEY (url, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS visits (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    visited_at REAL NOT NULL,
    status INTEGER,
    verdict TEXT NOT NULL,          -- not_modified, unchanged, changed, failed
    distance INTEGER,
    body_bytes INTEGER NOT NULL,    -- payload bytes received (0 for a 304)
    warc_file TEXT, warc_offset INTEGER
);
CREATE INDEX IF NOT EXISTS visits_url ON visits(url, visited_at);
"""

VERSION_COLUMNS = (
    "url", "version", "fetched_at", "final_url", "status", "content_type", "content_length",
    "content_sha256", "simhash", "distance", "title", "text", "etag", "last_modified",
    "warc_file", "warc_offset",
)  # fmt: skip


def ensure_versions_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN; {VERSIONS_SCHEMA} COMMIT;")


@dataclass(slots=True)
class RevisitState:
    """One page's row of ``revisit_state``: what its next revisit compares against."""

    url: str
    host: str
    final_url: str
    etag: str | None
    last_modified: str | None
    content_sha256: str | None
    simhash: str | None
    version: int
    version_at: float
    last_visit_at: float
    next_visit_at: float
    rate_per_s: float


@dataclass(slots=True)
class VisitRow:
    url: str
    visited_at: float
    status: int | None
    verdict: str
    distance: int | None
    body_bytes: int
    warc_file: str | None = None
    warc_offset: int | None = None


STATE_COLUMNS = (
    "url", "host", "final_url", "etag", "last_modified", "content_sha256", "simhash",
    "version", "version_at", "last_visit_at", "next_visit_at", "rate_per_s",
)  # fmt: skip


def unseeded_pages(conn: sqlite3.Connection, after_id: int = 0) -> tuple[list[tuple], int]:
    """Stored 2xx pages (of any type: a download that is not HTML, its ``error``
    ``not_html``, is revisited by conditional GET too) past page id ``after_id``
    without a revisit row yet, as seed_version reads them; and the highest page id
    read (the next call's ``after_id``: a continuous crawl reads only the pages
    stored since)."""
    top = conn.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0]
    rows = conn.execute(
        "SELECT url, host, final_url, fetched_at, status, content_type, content_length,"
        " content_sha256, simhash, title, text, warc_file, warc_offset, sitemap_lastmod,"
        " sitemap_changefreq"
        " FROM pages WHERE id > ? AND id <= ? AND kind = 'page' AND status BETWEEN 200 AND 299"
        " AND (error IS NULL OR error = ?) AND url NOT IN (SELECT url FROM revisit_state)"
        " ORDER BY id",
        (after_id, top, NOT_HTML),
    ).fetchall()
    return rows, top


def seed_version(conn: sqlite3.Connection, row: tuple, state: RevisitState) -> None:
    """Version 1 from the crawl's page row, and the page's first revisit state."""
    (url, _host, final_url, fetched_at, status, content_type, length, sha, simhash, title,
     text, warc_file, warc_offset, _lastmod, _changefreq) = row  # fmt: skip
    conn.execute(
        f"INSERT OR IGNORE INTO page_versions ({', '.join(VERSION_COLUMNS)})"
        f" VALUES ({', '.join('?' for _ in VERSION_COLUMNS)})",
        (url, 1, fetched_at, final_url, status, content_type, length, sha, simhash, None,
         title, text, state.etag, state.last_modified, warc_file, warc_offset),
    )  # fmt: skip
    put_state(conn, state)


def put_state(conn: sqlite3.Connection, state: RevisitState) -> None:
    values = tuple(getattr(state, name) for name in STATE_COLUMNS)
    conn.execute(
        f"INSERT OR REPLACE INTO revisit_state ({', '.join(STATE_COLUMNS)})"
        f" VALUES ({', '.join('?' for _ in STATE_COLUMNS)})",
        values,
    )


# A state and the depth of its page (its links are one deeper).
_STATE_SELECT = (
    f"SELECT {', '.join('s.' + name for name in STATE_COLUMNS)},"
    " coalesce((SELECT min(depth) FROM pages p WHERE p.url = s.url), 0)"
    " FROM revisit_state s"
)


def due_states(conn: sqlite3.Connection, now: float, limit: int) -> list[tuple[RevisitState, int]]:
    """(state, page depth) of pages due by ``now``, soonest first, at most ``limit``
    (the ``revisit_due`` index: no scan of the pages not due)."""
    rows = conn.execute(
        f"{_STATE_SELECT} WHERE s.next_visit_at <= ? ORDER BY s.next_visit_at LIMIT ?",
        (now, limit),
    )
    return [(RevisitState(*row[:-1]), row[-1]) for row in rows]


def states_after(
    conn: sqlite3.Connection, after_rowid: int, limit: int
) -> tuple[list[tuple[RevisitState, int]], int]:
    """The next ``limit`` states in table order after ``after_rowid``, due or not (one
    pass over every page), and the last rowid read."""
    rows = conn.execute(
        f"SELECT s.rowid, {_STATE_SELECT[len('SELECT ') :]} WHERE s.rowid > ?"
        " ORDER BY s.rowid LIMIT ?",
        (after_rowid, limit),
    ).fetchall()
    last = rows[-1][0] if rows else after_rowid
    return [(RevisitState(*row[1:-1]), row[-1]) for row in rows], last


def next_due_at(conn: sqlite3.Connection) -> float | None:
    row = conn.execute("SELECT min(next_visit_at) FROM revisit_state").fetchone()
    return row[0] if row else None


def visit_history(conn: sqlite3.Connection, url: str) -> list[tuple[float, str]]:
    """(visited_at, verdict) of the page's revisits, oldest first."""
    return conn.execute(
        "SELECT visited_at, verdict FROM visits WHERE url = ? ORDER BY visited_at", (url,)
    ).fetchall()


def add_visit(conn: sqlite3.Connection, visit: VisitRow) -> None:
    conn.execute(
        "INSERT INTO visits (url, visited_at, status, verdict, distance, body_bytes,"
        " warc_file, warc_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (visit.url, visit.visited_at, visit.status, visit.verdict, visit.distance,
         visit.body_bytes, visit.warc_file, visit.warc_offset),
    )  # fmt: skip


def add_version(conn: sqlite3.Connection, values: dict[str, object]) -> None:
    conn.execute(
        f"INSERT INTO page_versions ({', '.join(VERSION_COLUMNS)})"
        f" VALUES ({', '.join('?' for _ in VERSION_COLUMNS)})",
        tuple(values.get(name) for name in VERSION_COLUMNS),
    )


def versions_of(conn: sqlite3.Connection, url: str | None, latest_only: bool) -> Iterator[dict]:
    """Version rows (as dicts) of one URL or of all, oldest first; or only the latest."""
    columns = ", ".join(f"v.{name}" for name in VERSION_COLUMNS)
    where, params = ("WHERE v.url = ?", (url,)) if url is not None else ("", ())
    if latest_only:
        latest = "v.version = (SELECT max(version) FROM page_versions WHERE url = v.url)"
        where = f"{where} AND {latest}" if where else f"WHERE {latest}"
    cursor = conn.execute(
        f"SELECT {columns} FROM page_versions v {where} ORDER BY v.url, v.version", params
    )
    for row in cursor:
        version = dict(zip(VERSION_COLUMNS, row, strict=True))
        # A version with a gone status (404, 410) and no content marks the page gone.
        version["gone"] = version["status"] in (404, 410) and version["content_sha256"] is None
        yield version
