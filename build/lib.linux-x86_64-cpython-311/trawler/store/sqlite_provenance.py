"""The embedded store's provenance rows (provenance.py): written in each commit,
read by ``trawler why`` and the API's URL view.

One row per URL. A URL admitted replaces a row that left it out (the scope
widened by a new seed since); a URL left out while reading a page keeps the
first row; a URL skipped when its turn came (robots.txt, blocklist) keeps how
it was found and gains the reason.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from trawler.provenance import REDIRECT, Row, found_via
from trawler.store.base import SKIPPED, UrlOutcome

TABLE = """CREATE TABLE IF NOT EXISTS provenance (
    url TEXT PRIMARY KEY,
    parent_url TEXT,                -- the page (sitemap, redirect) that led to it
    via TEXT NOT NULL,              -- provenance.LINK, SITEMAP, REDIRECT, CANONICAL, ...
    anchor TEXT,                    -- the link's text
    reason TEXT,                    -- why it was left out (rejected.* / skipped.* names)
    detail TEXT                     -- the rule that decided, in words
) WITHOUT ROWID"""
COLUMNS = ("url", "parent_url", "via", "anchor", "reason", "detail")
# Both statements are the same in PostgreSQL but for the key (store/pg_provenance.py).
FOUND = (
    " ON CONFLICT ({key}) DO UPDATE SET parent_url = excluded.parent_url,"
    " via = excluded.via, anchor = excluded.anchor, reason = NULL, detail = NULL"
    " WHERE excluded.reason IS NULL AND provenance.reason IS NOT NULL"
)
SKIPPED_AT_FETCH = (
    " ON CONFLICT ({key}) DO UPDATE SET reason = excluded.reason, detail = excluded.detail"
)
_INSERT = "INSERT INTO provenance VALUES (?, ?, ?, ?, ?, ?)"
# urls.state (store/sqlite.py: QUEUED, DONE, SKIPPED, DEAD; not imported: it imports this)
_STATES = {0: "queued", 1: "fetched", 2: "skipped", 3: "failed"}
_HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'provenance'"


def add_provenance(conn: sqlite3.Connection) -> None:
    """The table, in a data directory of any version (issue 18)."""
    with conn:
        conn.execute(TABLE)


def split_rows(outcomes: Iterable[UrlOutcome]) -> tuple[list[Row], list[Row]]:
    """(rows of the URLs pages led to, rows of URLs skipped when their turn came)."""
    found: list[Row] = []
    skipped: list[Row] = []
    for outcome in outcomes:
        if outcome.provenance:
            (skipped if outcome.state == SKIPPED else found).extend(outcome.provenance)
    return found, skipped


def write(conn: sqlite3.Connection, outcomes: Iterable[UrlOutcome]) -> None:
    found, skipped = split_rows(outcomes)
    if found:
        conn.executemany(_INSERT + FOUND.format(key="url"), found)
    if skipped:
        conn.executemany(_INSERT + SKIPPED_AT_FETCH.format(key="url"), skipped)


def provenance(conn: sqlite3.Connection, url: str, host: str, max_pages: int | None) -> dict | None:
    """Why the crawl fetched or left out the normalised ``url``: None if it never met it."""
    found = None
    if conn.execute(_HAS_TABLE).fetchone():  # a data directory from before it: none
        sql = f"SELECT {', '.join(COLUMNS)} FROM provenance WHERE url = ?"
        found = conn.execute(sql, (url,)).fetchone()
    sql = "SELECT state, depth, parent_url, kind, reason FROM urls WHERE host = ? AND url = ?"
    known = conn.execute(sql, (host, url)).fetchone()
    page = conn.execute("SELECT status, error FROM pages WHERE url = ?", (url,)).fetchone()
    if found is None and known is None and page is None:
        return _redirected_to(conn, url)
    report = dict(zip(COLUMNS, found or (url, None, None, None, None, None), strict=True))
    report["found_via"], report["depth"] = report.pop("via"), None
    report["status"] = report["error"] = None
    decision = "skipped" if report["reason"] else "queued"
    if known is not None:
        state, report["depth"], parent, kind, skip_reason = known
        if report["found_via"] is None:  # seeds and robots.txt's sitemaps have no row
            report["found_via"], report["parent_url"] = found_via(parent, kind), parent
        report["reason"] = report["reason"] or skip_reason
        decision = _STATES.get(state, decision)
    if page is not None:
        report["status"], report["error"] = page
        decision = "fetched" if page[0] is not None else "failed"
    report["decision"] = decision
    if decision == "queued" and max_pages is not None and _stored(conn) >= max_pages:
        report["reason"], report["detail"] = "max_pages", f"--max-pages {max_pages}"
    return report


def _redirected_to(conn: sqlite3.Connection, url: str) -> dict | None:
    """A URL fetched as the end of another's redirects (on the same host): stored as
    that URL's page, never queued itself. A scan: pages.final_url has no index."""
    sql = "SELECT url, status, error, depth FROM pages WHERE final_url = ? LIMIT 1"
    row = conn.execute(sql, (url,)).fetchone()
    return None if row is None else redirect_report(url, *row)


def redirect_report(url: str, parent: str, status: int | None, error: str | None,
                    depth: int | None) -> dict:  # fmt: skip
    return {
        "url": url, "parent_url": parent, "found_via": REDIRECT, "anchor": None,
        "reason": None, "detail": None, "depth": depth, "status": status, "error": error,
        "decision": "fetched" if status is not None else "failed",
    }  # fmt: skip


def _stored(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM pages").fetchone()[0])
