"""Reading page versions of a distributed job: the queries and rows that
`trawler versions --postgres` and `trawler export --versions --postgres` (async,
pg_versions.py) and the API's blocking reader (api/pgreader.py, on a worker thread)
share, and that reader's blocking functions. The rows are the embedded store's
(store/versions.py, export_versions.py), keyed by job."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg

from trawler.export_versions import FETCH_COLUMNS
from trawler.store.versions import VERSION_COLUMNS

HAS_VERSIONS = "SELECT 1 FROM page_versions WHERE job_id = %s AND version > 1 LIMIT 1"
NEWER_COLUMNS = ("version", *FETCH_COLUMNS)
# A page's versions after the crawl's, by primary key: one lookup per exported row.
NEWER = (f"SELECT {', '.join(NEWER_COLUMNS)} FROM page_versions WHERE job_id = %s"
         " AND url = %s AND version > 1 ORDER BY version")  # fmt: skip
# The same with each version's text, for rows that carry text (Parquet exports).
NEWER_TEXT = NEWER.replace(" FROM ", ", text FROM ", 1)


def newer_query(row: dict) -> str:
    """The query of ``row``'s later versions: with their text if the row has text."""
    return NEWER_TEXT if "text" in row else NEWER


def versions_query(job_id: str, url: str | None, latest_only: bool) -> tuple[str, list]:
    """Version rows of one URL or of every page, oldest first; or each page's latest."""
    where, params = "v.job_id = %s", [job_id]
    if url is not None:
        where, params = where + " AND v.url = %s", [job_id, url]
    if latest_only:
        where += (" AND v.version = (SELECT max(version) FROM page_versions"
                  " WHERE job_id = v.job_id AND url = v.url)")  # fmt: skip
    columns = ", ".join(f"v.{name}" for name in VERSION_COLUMNS)
    return f"SELECT {columns} FROM page_versions v WHERE {where} ORDER BY v.url, v.version", params


def version_row(row: tuple) -> dict:
    """A version as `trawler versions` writes it, ``gone`` for a 404/410 version."""
    version = dict(zip(VERSION_COLUMNS, row, strict=True))
    version["gone"] = version["status"] in (404, 410) and version["content_sha256"] is None
    return version


def with_versions(row: dict, newer: list[tuple], which: str) -> Iterator[dict]:
    """An export row with its ``version``: its latest (``which`` latest) or a row for
    each (all, the crawl's first); robots.txt rows have none."""
    if row.get("kind") == "robots":
        yield {**row, "version": None}
        return
    if which == "latest":
        newer = newer[-1:]
    if which == "all" or not newer:
        yield {**row, "version": 1}
    columns = (*NEWER_COLUMNS, "text") if "text" in row else NEWER_COLUMNS
    for version in newer:
        yield {**row, **dict(zip(columns, version, strict=True))}


# -- blocking, for the API's reader ------------------------------------------------------
def versions_of(
    conn: psycopg.Connection, job_id: str, url: str | None, latest_only: bool
) -> list[dict]:
    sql, params = versions_query(job_id, url, latest_only)
    return [version_row(row) for row in conn.execute(sql, params).fetchall()]


def has_versions(conn: psycopg.Connection, job_id: str) -> bool:
    return conn.execute(HAS_VERSIONS, (job_id,)).fetchone() is not None


def versioned_rows(
    conn: psycopg.Connection, job_id: str, rows: Iterator[dict], which: str
) -> Iterator[dict]:
    """``rows`` (streamed by a server-side cursor of ``conn``) with their versions."""
    for row in rows:
        newer = [] if row.get("kind") == "robots" else conn.execute(
            newer_query(row), (job_id, row["url"])).fetchall()  # fmt: skip
        yield from with_versions(row, newer, which)
