"""The embedded store's running totals and the indexes of the dashboard's reads
(issue 13): what a snapshot of a big job reads without scanning its pages.

``page_totals`` (one row) holds the pages stored, their body bytes, the failed
fetches among them and the URLs visited (not queued). It changes in the same
transaction as the rows it counts, so it is exactly what counting the tables
would say. Triggers count the rare page updates and deletes and URL deletes (a
repair, a migration), whoever makes them. The crawl's hot writes count
themselves, one UPDATE a batch: pages are inserted by one writer only,
``SqliteStore.insert_pages`` (``count_inserted_pages``), and a URL leaves the
queue by one only, ``DiskQueues.persist_done`` (``count_visited``). A trigger per
row cost more than the row (issue 14, bench/bench_commit.py: 15 of 28 µs a page
inserted, 7.5 of 17 µs a URL finished, most of it for being there at all: one
whose WHEN never held cost 5). A new writer of page rows or URL states counts
its rows the same way, in its transaction. The two
indexes answer the time windows (``pages_fetched``: covering, so the per-second
series reads no page row) and the errors (``pages_failed``: the failed pages only).

A URL enters ``urls`` queued (frontier/disk_queue.py ``persist_new``, its one
writer of rows; the migration of an older urls table runs before these exist), so
no trigger watches inserts there: even one that never fires doubled the CPU time of
inserting a URL (bench/bench_writer.py: 16 against 8 µs), the crawl's hottest write.

A data directory of an older Trawler gets them when a writer opens it (``connect``):
one transaction that counts once and builds the indexes. A reader of one not yet
migrated (read-only: it cannot) counts, as before: ``totals`` is None there.
"""

from __future__ import annotations

import sqlite3

from trawler.outcome import NOT_HTML
from trawler.records import PageRecord

# As sqlite_read.FAILED; the urls states of store/sqlite.py (0: QUEUED), which
# imports this module to migrate on connect.
FAILED = f"error IS NOT NULL AND error != '{NOT_HTML}'"
_QUEUED = 0

INDEXES = (
    "CREATE INDEX IF NOT EXISTS pages_fetched ON pages(fetched_at, status, error, content_length)",
    f"CREATE INDEX IF NOT EXISTS pages_failed ON pages(id, error) WHERE {FAILED}",
)

_TABLE = """CREATE TABLE page_totals (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    pages INTEGER NOT NULL, bytes INTEGER NOT NULL, failed INTEGER NOT NULL,
    visited INTEGER NOT NULL
)"""


def _page_delta(row: str, sign: str) -> str:
    failed = f"{row}.error IS NOT NULL AND {row}.error != '{NOT_HTML}'"
    return (
        f"UPDATE page_totals SET pages = pages {sign} 1,"
        f" bytes = bytes {sign} coalesce({row}.content_length, 0),"
        f" failed = failed {sign} ({failed});"
    )


def _visited(row: str) -> str:
    return f"({row}.state != {_QUEUED})"


# Triggers of older versions, dropped on open: the writers count those rows themselves.
_DROPPED = ("page_totals_insert", "urls_visited_update")
_TRIGGERS = (
    f"CREATE TRIGGER page_totals_delete AFTER DELETE ON pages BEGIN {_page_delta('old', '-')} END",
    "CREATE TRIGGER page_totals_update AFTER UPDATE OF content_length, error ON pages BEGIN"
    f" {_page_delta('old', '-')} {_page_delta('new', '+')} END",
    f"CREATE TRIGGER urls_visited_delete AFTER DELETE ON urls WHEN {_visited('old')} BEGIN"
    " UPDATE page_totals SET visited = visited - 1; END",
)


_COUNTED = (
    f"count(*), coalesce(sum(content_length), 0), coalesce(sum({FAILED}), 0),"
    f" (SELECT count(*) FROM urls WHERE state != {_QUEUED}) FROM pages"
)


def recount(conn: sqlite3.Connection) -> None:
    """Count the totals again from the tables: after rows written past the writers
    that count them (a repair by hand, a test's made-up data directory)."""
    conn.execute(f"UPDATE page_totals SET (pages, bytes, failed, visited) = (SELECT {_COUNTED})")


def add_totals(conn: sqlite3.Connection) -> None:
    """Create the totals (counted once from the tables) and their triggers, and the
    indexes, unless there; all or nothing. On the writer's connection."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'page_totals'"
    if conn.execute(found).fetchone() is not None:
        with conn:  # made by a version that counted these rows by trigger
            for trigger in _DROPPED:
                conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        return
    with conn:
        conn.execute("BEGIN")  # DDL included: all of it or nothing
        conn.execute(_TABLE)
        conn.execute(f"INSERT INTO page_totals SELECT 0, {_COUNTED}")
        for statement in (*_TRIGGERS, *INDEXES):
            conn.execute(statement)


def count_inserted_pages(
    conn: sqlite3.Connection, pages: list[PageRecord], inserted: int, after_id: int
) -> None:
    """Add the pages one INSERT stored to the totals, in its transaction. ``inserted``:
    the rows it stored (its rowcount), ``after_id``: the highest pages.id before it.
    When all were stored they are counted here; when some were not (a URL stored
    already) or a value is not what a row of ours holds, the rows after ``after_id``
    are counted in the table."""
    if inserted == len(pages):
        try:
            length = sum(page.content_length or 0 for page in pages)
            failed = sum(page.error is not None and page.error != NOT_HTML for page in pages)
        except TypeError:  # a length of another type: the table knows what it became
            pass
        else:
            conn.execute(_ADD_PAGES, (inserted, length, failed))
            return
    conn.execute(_ADD_STORED_PAGES, (after_id,))


_ADD_PAGES = "UPDATE page_totals SET pages = pages + ?, bytes = bytes + ?, failed = failed + ?"
_ADD_STORED_PAGES = (
    "UPDATE page_totals SET pages = pages + added.n, bytes = bytes + added.b,"
    " failed = failed + added.f FROM (SELECT count(*) AS n,"
    f" coalesce(sum(content_length), 0) AS b, coalesce(sum({FAILED}), 0) AS f"
    " FROM pages WHERE id > ?) AS added"
)


def count_visited(conn: sqlite3.Connection, finished: int) -> None:
    """``finished`` URLs left the queue (done, dead or skipped), in this transaction."""
    if finished:
        conn.execute("UPDATE page_totals SET visited = visited + ?", (finished,))


def totals(conn: sqlite3.Connection) -> dict[str, int] | None:
    """pages, bytes, failed, visited; None in a database not migrated yet."""
    try:
        row = conn.execute("SELECT pages, bytes, failed, visited FROM page_totals").fetchone()
    except sqlite3.OperationalError:  # no such table: an older data directory
        return None
    if row is None:
        return None
    return dict(zip(("pages", "bytes", "failed", "visited"), row, strict=True))
