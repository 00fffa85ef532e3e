"""A stored page's reuse reservation (tdmrep.py) for the API's URL view, from either
store: the fields the page export has, all None when no page is stored."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from trawler.store.sqlite_schema import has_column

if TYPE_CHECKING:
    import psycopg

PAGE_FIELDS = ("tdm_reservation", "tdm_policy", "tdm_source", "ai_robots_groups",
               "ai_robots_disallowed")  # fmt: skip
_SELECT = f"SELECT {', '.join(PAGE_FIELDS)} FROM pages"


def _fields(row: tuple | None) -> dict:
    found = dict(zip(PAGE_FIELDS, row or (None,) * len(PAGE_FIELDS), strict=True))
    if found["tdm_reservation"] is not None:  # SQLite's 0/1
        found["tdm_reservation"] = bool(found["tdm_reservation"])
    return found


def page_reservation(conn: sqlite3.Connection, url: str) -> dict:
    if not has_column(conn, "pages", "tdm_source"):  # a database from before them
        return _fields(None)
    return _fields(conn.execute(f"{_SELECT} WHERE url = ?", (url,)).fetchone())


def pg_page_reservation(conn: psycopg.Connection, job_id: str, url: str) -> dict:
    row = conn.execute(f"{_SELECT} WHERE job_id = %s AND url = %s", (job_id, url)).fetchone()
    return _fields(row)
