"""The link graph in the embedded store: the ``links`` table, its writes and reads.

A row per edge (graph.py), written in the commit's transaction with its page:
a crash leaves no edge without its page, nor a page without its edges. Rows
are compact: the page they are on by its ``pages.id``, the target as text
(links the crawl turned away have no other row to point to) and its 64-bit
fingerprint, by which an index counts a URL's inbound links. Only pages
stored by this commit get edges: a URL stored already (``ON CONFLICT DO
NOTHING``) keeps the edges it was stored with.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
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
CREATE INDEX IF NOT EXISTS links_to ON links(to_fp, from_page);
"""
_INSERT = "INSERT INTO links (from_page, to_url, to_fp, anchor, rel, reason) VALUES (?,?,?,?,?,?)"
REFERRERS_SHOWN = 10  # pages linking to a URL named in its report


def ensure_graph_schema(conn: sqlite3.Connection) -> None:
    """Create the table (idempotent: a data directory from before it gets it empty)."""
    conn.executescript(f"BEGIN; {LINKS_SCHEMA} COMMIT;")


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
    count, first = inbound(conn, url_fingerprint(url))
    return {"inbound_links": count, "linked_from": first}


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
