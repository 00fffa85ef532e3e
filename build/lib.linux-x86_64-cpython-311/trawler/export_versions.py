"""Page versions in the export (issue 15): ``--versions latest`` (the default) gives
each revisited page's newest version, ``--versions all`` every version in order.

A page's row from ``pages`` is its version 1; a later version (store/versions.py)
replaces the fields a fetch decides (final URL, status, type, length, title, hash,
SimHash, fetch time, WARC place) and keeps those of the crawl (depth, parent, links,
canonical, ...). A job never revisited exports exactly as before: no ``version``
column. Versions are looked up per page row (its primary key), so memory stays flat.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from trawler.store.sqlite import has_table

VERSIONS = ("latest", "all")
# Export columns a revisit's fetch decides: the newer version's value wins.
FETCH_COLUMNS = (
    "final_url", "status", "content_type", "content_length", "title", "content_sha256",
    "fetched_at", "simhash", "warc_file", "warc_offset",
)  # fmt: skip


def has_versions(conn: sqlite3.Connection) -> bool:
    """True when some page has a version beyond the crawl's."""
    if not has_table(conn, "page_versions"):
        return False
    later = conn.execute("SELECT 1 FROM page_versions WHERE version > 1 LIMIT 1")
    return later.fetchone() is not None


def versioned_rows(conn: sqlite3.Connection, rows: Iterator[dict], which: str) -> Iterator[dict]:
    """The export's rows with a ``version`` each (None for robots.txt fetches); a row
    with ``text`` (Parquet) gets its version's text."""
    order = " ORDER BY version DESC LIMIT 1" if which == "latest" else " ORDER BY version"
    for row in rows:
        if row.get("kind") == "robots":
            yield {**row, "version": None}
            continue
        columns = ("version", *FETCH_COLUMNS, *(("text",) if "text" in row else ()))
        later = conn.execute(
            f"SELECT {', '.join(columns)} FROM page_versions WHERE url = ? AND version > 1"
            + order, (row["url"],),
        )  # fmt: skip
        newer = later.fetchall()
        if which == "all" or not newer:
            yield {**row, "version": 1}
        for version in newer:
            yield {**row, **dict(zip(columns, version, strict=True))}
