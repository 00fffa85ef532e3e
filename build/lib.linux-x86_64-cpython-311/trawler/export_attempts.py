"""`trawler export --attempts`: the fetch log, a row per attempt (retries included),
from the ``fetch_attempts`` table of either store, in any row format (export.py).

A page's export row says how its URL ended; these rows say how it got there: each
try's start, duration, status or error, and the retry decision taken (done, retry,
fail, dead). Streamed in the order they were stored, so memory stays flat.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING, TextIO

from trawler.store.sqlite import has_table

if TYPE_CHECKING:
    import psycopg

ATTEMPT_COLUMNS = ("url", "attempt", "started_at", "duration_s", "status", "error", "decision")
_SELECT = f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM fetch_attempts"


def iter_attempts(conn: sqlite3.Connection) -> Iterator[dict]:
    """The embedded store's attempt rows, oldest first."""
    if not has_table(conn, "fetch_attempts"):  # a database of an older Trawler
        return
    for values in conn.execute(f"{_SELECT} ORDER BY id"):
        yield dict(zip(ATTEMPT_COLUMNS, values, strict=True))


async def aiter_attempts(conn: psycopg.AsyncConnection, job_id: str) -> AsyncGenerator[dict, None]:
    """A distributed job's attempt rows, oldest first, through a server-side cursor
    (in the caller's transaction)."""
    cursor = conn.cursor(name=f"attempts_{uuid.uuid4().hex[:8]}")
    cursor.itersize = 1000
    async with cursor:
        await cursor.execute(f"{_SELECT} WHERE job_id = %s ORDER BY id", (job_id,))
        async for values in cursor:
            yield dict(zip(ATTEMPT_COLUMNS, values, strict=True))


def write_attempts(conn: sqlite3.Connection, out: TextIO, fmt: str) -> int:
    """Write the embedded store's attempt rows to ``out`` as ``fmt``; returns how many."""
    from trawler.export import write_rows

    return write_rows(iter_attempts(conn), out, fmt, ATTEMPT_COLUMNS)
