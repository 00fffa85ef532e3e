"""The link graph in the embedded store: the ``links`` table, its writes and reads.

A row per edge (graph.py), written in the commit's transaction with its page:
a crash leaves no edge without its page, nor a page without its edges. Rows
are compact: the page they are on by its ``pages.id``, the target as text
(links the crawl turned away have no other row to point to) and its 64-bit
fingerprint, by which an index counts a URL's inbound links. Only pages
stored by this commit get edges: a URL stored already (``ON CONFLICT DO
NOTHING``) keeps the edges it was stored with.

The index (``links_to``) is not kept up while a crawl writes: fingerprints are
random, so each edge lands on a random leaf of it, and once the index outgrows
SQLite's page cache every commit rewrote most of its leaves into the WAL. On
the 2,000-host benchmark that made the writer slower as the crawl grew and the
crawl process's memory rise with it (+40 % writer CPU, 209 → 434 MB peak RSS;
bench/RESULTS.md). A crawl drops it when it opens the store (``pause_index``)
and builds it, one sort, when it closes (``build_index``); meanwhile a count
reads the table, within a time budget.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from trawler.dedup import url_fingerprint
from trawler.graph import EDGE_COLUMNS

if TYPE_CHECKING:
    from trawler.store.base import UrlOutcome

LINKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS links (  -- the link graph: a row per edge (graph.py)
    from_page INTEGER NOT NULL,     -- pages.id of the page the link is on
    to_url TEXT NOT NULL,           -- normalised; as resolved when it does not normalise
    to_fp INTEGER,                  -- dedup.url_fingerprint(to_url); NULL: bad_url
    anchor TEXT,                    -- the link's text; NULL when empty
    rel TEXT,                       -- its rel attribute, lowercased
    reason TEXT                     -- NULL: admitted by the link filter; else why not
);
"""
_INDEX = "CREATE INDEX IF NOT EXISTS links_to ON links(to_fp, from_page)"
_INSERT = "INSERT INTO links (from_page, to_url, to_fp, anchor, rel, reason) VALUES (?,?,?,?,?,?)"
REFERRERS_SHOWN = 10  # pages linking to a URL named in its report
# A count without the index scans the table: given up past this (a running crawl
# of millions of edges), the count then unknown rather than the request slow.
SCAN_BUDGET_S = 1.0
_SCAN_CHECK_STEPS = 10_000  # SQLite VM steps between looks at the clock


def ensure_graph_schema(conn: sqlite3.Connection) -> None:
    """Create the table (idempotent: a data directory from before it gets it empty)."""
    conn.executescript(f"BEGIN; {LINKS_SCHEMA} COMMIT;")


def pause_index(conn: sqlite3.Connection) -> None:
    """A crawl's writes begin: the inbound index goes (see the module doc)."""
    conn.executescript("BEGIN; DROP INDEX IF EXISTS links_to; COMMIT;")


def build_index(conn: sqlite3.Connection) -> None:
    """A crawl's writes end: the inbound index, built in one sort of the edges."""
    conn.executescript(f"BEGIN; {_INDEX}; COMMIT;")


def has_index(conn: sqlite3.Connection) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'links_to'"
    return conn.execute(sql).fetchone() is not None


def last_page_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0])


def insert_edges(conn: sqlite3.Connection, outcomes: Iterable[UrlOutcome], after_id: int) -> None:
    """The edges of the outcomes' pages inserted after page ``after_id`` (this commit's),
    in the caller's transaction."""
    linked = [o for o in outcomes if o.edges and o.page is not None]
    if not linked:
        return
    ids = dict(conn.execute("SELECT url, id FROM pages WHERE id > ?", (after_id,)))
    rows = (
        (page_id, *edge)
        for outcome in linked
        if (page_id := ids.get(outcome.page.url)) is not None  # type: ignore[union-attr]
        for edge in outcome.edges
    )
    conn.executemany(_INSERT, rows)


def has_graph(conn: sqlite3.Connection) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'links'"
    return conn.execute(sql).fetchone() is not None


def iter_edges(conn: sqlite3.Connection, batch_rows: int = 1000) -> Iterator[dict]:
    """Every edge (``EDGE_COLUMNS``) in commit order, a page's edges in document order."""
    if not has_graph(conn):
        return
    # CROSS JOIN: links drive the loop (in rowid order), each page found by its id.
    cursor = conn.execute(
        "SELECT p.url, l.to_url, l.anchor, l.rel, l.reason"
        " FROM links AS l CROSS JOIN pages AS p ON p.id = l.from_page ORDER BY l.rowid"
    )
    while rows := cursor.fetchmany(batch_rows):
        for row in rows:
            yield dict(zip(EDGE_COLUMNS, row, strict=True))


def inbound_report(conn: sqlite3.Connection, url: str) -> dict:
    """A URL report's inbound links from the graph (nothing when the store has none):
    ``inbound_links`` the pages linking to normalised ``url``, ``linked_from`` the first."""
    if not has_graph(conn):
        return {}
    if has_index(conn):
        count, first = inbound(conn, url_fingerprint(url))
        return {"inbound_links": count, "linked_from": first}
    try:  # a crawl is writing (or was killed): the table read within a budget
        with _time_budget(conn, SCAN_BUDGET_S):
            count, first = inbound(conn, url_fingerprint(url))
    except sqlite3.OperationalError as exc:
        if "interrupted" not in str(exc):
            raise
        return {"inbound_links": None, "linked_from": []}
    return {"inbound_links": count, "linked_from": first}


@contextmanager
def _time_budget(conn: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """Statements on ``conn`` interrupted ("interrupted") once ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: time.monotonic() > deadline, _SCAN_CHECK_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def inbound(conn: sqlite3.Connection, fp: int) -> tuple[int, list[str]]:
    """Pages linking to the URL of fingerprint ``fp``: how many, and the first
    ``REFERRERS_SHOWN`` in crawl order."""
    count = conn.execute(
        "SELECT count(DISTINCT from_page) FROM links WHERE to_fp = ?", (fp,)
    ).fetchone()[0]
    first = conn.execute(
        "SELECT p.url FROM (SELECT DISTINCT from_page FROM links WHERE to_fp = ?"
        " ORDER BY from_page LIMIT ?) AS l JOIN pages AS p ON p.id = l.from_page ORDER BY p.id",
        (fp, REFERRERS_SHOWN),
    )
    return int(count), [row[0] for row in first]
