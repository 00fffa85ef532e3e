"""PostgreSQL's provenance rows (provenance.py; the table: pgschema.PROVENANCE),
written in each commit's transaction and read by ``trawler why --postgres`` and
the API's URL view. The same rules as the embedded store's
(store/sqlite_provenance.py); the frontier is Redis, so a URL's state is read
off its page row and its provenance row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import psycopg

from trawler.provenance import SEED, found_via
from trawler.store.base import UrlOutcome
from trawler.store.sqlite_provenance import (
    COLUMNS,
    FOUND,
    SKIPPED_AT_FETCH,
    redirect_report,
    split_rows,
)

_INSERT = "INSERT INTO provenance VALUES (%s, %s, %s, %s, %s, %s, %s)"
_FOUND = _INSERT + FOUND.format(key="job_id, url")
_SKIPPED = _INSERT + SKIPPED_AT_FETCH.format(key="job_id, url")


def _url(row: tuple) -> str:
    return row[0]


def provenance_writes(
    job_id: str, outcomes: Sequence[UrlOutcome], then: Callable[..., Awaitable[None]] | None
) -> Callable[[psycopg.AsyncCursor], Awaitable[None]] | None:
    """What a commit also writes: its outcomes' provenance rows, then ``then``'s."""
    found, skipped = split_rows(outcomes)
    if not found and not skipped:
        return then

    async def write(cur: psycopg.AsyncCursor) -> None:
        for sql, rows in ((_FOUND, found), (_SKIPPED, skipped)):
            if rows:
                # A URL once, in URL order: two workers' commits upserting the same URLs
                # in other orders could each hold a row the other waits for (deadlock).
                ordered = sorted({row[0]: row for row in rows}.values(), key=_url)
                await cur.executemany(sql, [(job_id, *row) for row in ordered])
        if then is not None:
            await then(cur)

    return write


def provenance(
    conn: psycopg.Connection, job_id: str, url: str, max_pages: int | None
) -> dict | None:
    """Why the job fetched or left out the normalised ``url``: None if nothing tells."""
    found = conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM provenance WHERE job_id = %s AND url = %s",
        (job_id, url),
    ).fetchone()
    page = conn.execute(
        "SELECT status, error, depth, parent_url, kind FROM pages WHERE job_id = %s AND url = %s",
        (job_id, url),
    ).fetchone()
    if found is None and page is None:
        return _redirected_to(conn, job_id, url)
    report = dict(zip(COLUMNS, found or (url, None, SEED, None, None, None), strict=True))
    report["found_via"] = report.pop("via")
    report["status"], report["error"], report["depth"] = None, None, None
    report["decision"] = "skipped" if report["reason"] else "queued"
    if page is not None:
        report["status"], report["error"], report["depth"], parent, kind = page
        report["decision"] = "fetched" if page[0] is not None else "failed"
        if found is None:  # a page without a row: a seed, a sitemap robots.txt names
            report["parent_url"], report["found_via"] = parent, found_via(parent, kind)
    if report["decision"] == "queued" and max_pages is not None:
        stored = conn.execute("SELECT count(*) FROM pages WHERE job_id = %s", (job_id,))
        if (stored.fetchone() or (0,))[0] >= max_pages:
            report["reason"], report["detail"] = "max_pages", f"--max-pages {max_pages}"
    return report


def _redirected_to(conn: psycopg.Connection, job_id: str, url: str) -> dict | None:
    """A URL fetched as the end of another's redirects: that URL's page. A scan of
    the job's pages (final_url has no index): a one-off question's cost."""
    row = conn.execute(
        "SELECT url, status, error, depth FROM pages WHERE job_id = %s AND final_url = %s LIMIT 1",
        (job_id, url),
    ).fetchone()
    return None if row is None else redirect_report(url, *row)
