"""More of the embedded store's read side: what the API shows of one job's data.

Every function takes a read-only connection (``sqlite.connect(dir, readonly=True)``)
and returns plain values; ``trawler export|stats|search`` keep their own
functions (sqlite.py, search.py), which the API calls as they are.

Times are Unix seconds (pages.fetched_at is the wall-clock start of the fetch).
Some reads scan a table that has no index for them (pages by host, fetch
attempts by URL): fine for the API's one-off questions, never on the crawl path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from trawler.config import CrawlConfig, stored_config
from trawler.outcome import NOT_HTML
from trawler.records import FetchResult
from trawler.robotscache import entry_from_fetch
from trawler.store import sqlite_totals
from trawler.store.sqlite import DEAD, DONE, QUEUED, ROBOTS_TXT_ONLY, SKIPPED
from trawler.store.sqlite_export import EXPORT_COLUMNS, kind_expression, page_columns, typed_row
from trawler.urls import host_key, origin

URL_STATES = {QUEUED: "queued", DONE: "done", SKIPPED: "skipped", DEAD: "dead"}
# A page whose fetch failed: an error code other than "not HTML" (which is no error).
FAILED = f"error IS NOT NULL AND error != '{NOT_HTML}'"
PAGE_ROWS_MAX = 1000


@dataclass(slots=True)
class StoredJob:
    id: str
    state: str  # the store's own word: seeding, running, stopped, finished
    config: CrawlConfig
    created_at: float
    updated_at: float


@dataclass(slots=True)
class PageFilter:
    """What ``page_rows`` keeps; None = any."""

    host: str | None = None
    status: int | None = None
    kind: str | None = None
    failed: bool | None = None  # True: fetch errors only; False: none of them
    since: float | None = None
    until: float | None = None


def scalar(conn: sqlite3.Connection, sql: str, args: tuple = ()) -> float:
    return conn.execute(sql, args).fetchone()[0] or 0


def stored_job(conn: sqlite3.Connection) -> StoredJob | None:
    """The directory's job (its newest one), or None before any crawl."""
    row = conn.execute(
        "SELECT id, config, state, created_at, updated_at FROM jobs"
        " ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    return StoredJob(row[0], row[2], stored_config(row[1])[0], row[3], row[4])


def job_counts(conn: sqlite3.Connection) -> dict[str, float]:
    """pages_crawled, urls_queued, errors, pages_per_s: the pace over the last minute
    of fetching (up to the last page stored; over less when it began less long ago)."""
    found = page_totals(conn)
    return {
        "pages_crawled": found["pages"],
        "urls_queued": scalar(conn, "SELECT sum(queued) FROM host_queues"),
        "errors": found["failed"],
        "pages_per_s": recent_pace(conn, 60.0),
    }


def page_totals(conn: sqlite3.Connection) -> dict[str, int]:
    """pages, bytes, failed, visited: kept by the store (sqlite_totals.py), or counted
    in a data directory no writer of this version has opened yet."""
    kept = sqlite_totals.totals(conn)
    if kept is not None:
        return kept
    return {
        "pages": int(scalar(conn, "SELECT count(*) FROM pages")),
        "bytes": int(scalar(conn, "SELECT sum(content_length) FROM pages")),
        "failed": int(scalar(conn, f"SELECT count(*) FROM pages WHERE {FAILED}")),
        "visited": int(scalar(conn, f"SELECT count(*) FROM urls WHERE state != {QUEUED}")),
    }


def recent_pace(conn: sqlite3.Connection, window_s: float) -> float:
    """Pages a second over the last ``window_s`` of fetching; 0 below two pages."""
    last = conn.execute("SELECT max(fetched_at) FROM pages").fetchone()[0]
    if last is None:
        return 0.0
    count, first = conn.execute(
        "SELECT count(*), min(fetched_at) FROM pages WHERE fetched_at > ?", (last - window_s,)
    ).fetchone()
    span = last - first
    return round((count - 1) / span, 3) if count > 1 and span > 0 else 0.0


def _page_where(f: PageFilter) -> tuple[str, list]:
    clauses, args = ["1"], []
    for sql, value in (("host = ?", f.host), ("status = ?", f.status),
                       ("fetched_at >= ?", f.since), ("fetched_at < ?", f.until)):  # fmt: skip
        if value is not None:
            clauses.append(sql)
            args.append(value)
    if f.failed is not None:
        clauses.append(FAILED if f.failed else f"NOT ({FAILED})")
    return " AND ".join(clauses), args


def page_rows(
    conn: sqlite3.Connection, wanted: PageFilter, offset: int, limit: int,
    newest_first: bool = False,
) -> tuple[list[dict], int]:  # fmt: skip
    """Export rows (``EXPORT_COLUMNS``) of the pages ``wanted`` keeps, in commit order
    (or its reverse), and how many there are in all."""
    kind = kind_expression(conn)
    where, args = _page_where(wanted)
    if wanted.kind is not None:
        where += f" AND {kind} = ?"
        args.append(wanted.kind)
    total = int(scalar(conn, f"SELECT count(*) FROM pages WHERE {where}", tuple(args)))
    columns = page_columns(conn)
    cursor = conn.execute(
        f"SELECT {columns}, {kind} FROM pages WHERE {where}"
        f" ORDER BY id{' DESC' if newest_first else ''} LIMIT ? OFFSET ?",
        (*args, min(limit, PAGE_ROWS_MAX), offset),
    )
    rows = []
    for values in cursor:
        rows.append(typed_row(dict(zip(EXPORT_COLUMNS, values, strict=True))))
    return rows, total


def error_rows(
    conn: sqlite3.Connection, limit: int, code: str | None = None, host: str | None = None,
    counted: bool = True,
) -> tuple[list[dict], dict[str, int]]:  # fmt: skip
    """The ``limit`` latest failed fetches (of that error ``code``, that ``host``),
    newest first, and the count of each error code over the whole job (none unless
    ``counted``)."""
    where, args = FAILED, []
    for sql, value in (("error = ?", code), ("host = ?", host)):
        if value is not None:
            where += f" AND {sql}"
            args.append(value)
    rows = conn.execute(
        "SELECT url, error, status, fetched_at, attempts, host FROM pages"
        f" WHERE {where} ORDER BY id DESC LIMIT ?",
        (*args, limit),
    )
    names = ("url", "error", "status", "fetched_at", "attempts", "host")
    latest = [dict(zip(names, row, strict=True)) for row in rows]
    if not counted:
        return latest, {}
    counts = conn.execute(
        f"SELECT error, count(*) FROM pages WHERE {FAILED} GROUP BY 1 ORDER BY 2 DESC, 1"
    )
    return latest, {code: count for code, count in counts}


def robots_verdict(conn: sqlite3.Connection, url: str, token: str) -> dict | None:
    """The kept robots.txt of ``url``'s origin and its verdict on ``url``: the rule and
    its line that decided (None when no robots.txt of that origin is kept)."""
    row = conn.execute(
        f"SELECT status, error, body, fetched_at FROM robots WHERE site = ? AND {ROBOTS_TXT_ONLY}"
        " ORDER BY fetched_at DESC LIMIT 1",
        (origin(url),),
    ).fetchone()
    if row is None:
        return None
    status, error, body, fetched_at = row
    result = FetchResult("", "", status=status, error=error, body=bytes(body))
    entry = entry_from_fetch(result, token, 0.0, None)
    verdict = entry.rules.explain(url)
    return {
        "robots_url": origin(url) + "/robots.txt", "status": status, "error": error,
        "fetched_at": fetched_at, "allowed": verdict.allowed and entry.fatal_error is None,
        "rule": verdict.rule, "line": verdict.line, "group": verdict.group,
        "crawl_delay": entry.rules.crawl_delay,
    }  # fmt: skip


def url_report(conn: sqlite3.Connection, url: str, token: str) -> dict:
    """What the job knows of one normalised URL. One it never queued is ``unseen``: a
    link robots.txt or the scope turned away is not kept, but the robots.txt verdict
    still says why."""
    host = host_key(url)
    known = conn.execute(
        "SELECT state, depth, reason, attempts, kind, parent_url FROM urls"
        " WHERE host = ? AND url = ? LIMIT 1",
        (host, url),
    ).fetchone()
    page = conn.execute(
        "SELECT status, content_sha256, links_count, error, fetched_at FROM pages WHERE url = ?",
        (url,),
    ).fetchone()
    history = conn.execute(
        "SELECT attempt, started_at, duration_s, status, error, decision FROM fetch_attempts"
        " WHERE url = ? ORDER BY id",
        (url,),
    )
    names = ("attempt", "started_at", "duration_s", "status", "error", "decision")
    fetches = [dict(zip(names, row, strict=True)) for row in history]
    discovered = scalar(conn, "SELECT count(*) FROM urls WHERE parent_url = ?", (url,))
    return {
        "url": url, "host": host,
        "state": URL_STATES.get(known[0], "unknown") if known else "done" if page else "unseen",
        "depth": known[1] if known else None, "skip_reason": known[2] if known else None,
        "kind": known[4] if known else None, "parent_url": known[5] if known else None,
        "status": page[0] if page else None, "content_sha256": page[1] if page else None,
        "error": page[3] if page else None, "fetched_at": page[4] if page else None,
        "fetches": fetches, "outbound_links": page[2] if page else None,
        "inbound_links": 1 if known and known[5] else 0, "urls_discovered": int(discovered),
        "robots": robots_verdict(conn, url, token),
    }  # fmt: skip


def activity(conn: sqlite3.Connection, now: float) -> dict:
    """Throughput: pages/s over the last 10 s, 1 and 5 minutes; failed and all fetches of
    the last hour; storage; the queue."""

    def fetched_since(seconds: float) -> float:
        return scalar(conn, "SELECT count(*) FROM pages WHERE fetched_at >= ?", (now - seconds,))

    found = page_totals(conn)
    hour, errors = conn.execute(  # one pass over the hour's index entries, not two
        f"SELECT count(*), coalesce(sum({FAILED}), 0) FROM pages WHERE fetched_at >= ?",
        (now - 3600,),
    ).fetchone()
    return {
        "throughput": {"now": round(fetched_since(10) / 10, 3),
                       "last_1m": round(fetched_since(60) / 60, 3),
                       "last_5m": round(fetched_since(300) / 300, 3)},  # fmt: skip
        "errors": {"last_hour": int(errors), "fetched_last_hour": int(hour)},
        "storage": {"pages": found["pages"], "bytes": found["bytes"]},
        "queue": {"pending": int(scalar(conn, "SELECT sum(queued) FROM host_queues")),
                  "visited": found["visited"]},
    }  # fmt: skip


def per_second(conn: sqlite3.Connection, start: float, end: float) -> list[tuple]:
    """(second, status class or 0 for none, failed, pages, body bytes) for pages fetched
    in [start, end)."""
    return conn.execute(
        f"SELECT CAST(fetched_at AS INTEGER), coalesce(status / 100, 0), {FAILED}, count(*),"
        " coalesce(sum(content_length), 0)"
        " FROM pages WHERE fetched_at >= ? AND fetched_at < ? GROUP BY 1, 2, 3",
        (start, end),
    ).fetchall()


def metric_numbers(conn: sqlite3.Connection) -> dict:
    """Totals for /metrics: pages, bytes, responses by status class, errors by code,
    robots denials, frontier size, hosts with queued URLs, fetch durations."""
    grouped: Callable[[str], dict] = lambda sql: dict(conn.execute(sql).fetchall())  # noqa: E731
    return {
        "pages": scalar(conn, "SELECT count(*) FROM pages"),
        "bytes": scalar(conn, "SELECT sum(content_length) FROM pages"),
        "status_classes": grouped(
            "SELECT (status / 100) || 'xx', count(*) FROM pages WHERE status IS NOT NULL GROUP BY 1"
        ),
        "errors": grouped(f"SELECT error, count(*) FROM pages WHERE {FAILED} GROUP BY 1"),
        # Links turned away when found (a counter) and URLs skipped when their turn came.
        "robots_denied": scalar(
            conn, "SELECT coalesce(sum(value), 0) FROM counters WHERE name = 'rejected.robots'"
        )
        + scalar(conn, f"SELECT count(*) FROM urls WHERE state = {SKIPPED} AND reason = 'robots'"),
        "frontier": scalar(conn, "SELECT sum(queued) FROM host_queues"),
        "active_hosts": scalar(conn, "SELECT count(*) FROM host_queues WHERE queued > 0"),
    }


def fetch_durations(conn: sqlite3.Connection, bounds: tuple[float, ...]) -> tuple[list, float, int]:
    """Cumulative counts of fetch attempts at or under each bound, their sum, their count."""
    counts = ", ".join(f"sum(duration_s <= {float(b)!r})" for b in bounds)
    row = conn.execute(
        f"SELECT {counts}, sum(duration_s), count(*) FROM fetch_attempts"
        " WHERE duration_s IS NOT NULL"
    ).fetchone()
    return [value or 0 for value in row[: len(bounds)]], row[-2] or 0.0, row[-1]
