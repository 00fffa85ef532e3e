"""The distributed store's read side for the API: one job's data in PostgreSQL.

The counterpart of sqlite_read.py over the ``pages``, ``fetch_attempts``,
``counters`` and ``robots_fetches`` tables, on a plain (blocking) psycopg
connection: the API calls these on a worker thread (api/pgreader.py). Each
function returns the same shapes as its SQLite twin. What only the frontier
knows (URLs queued, per host) lives in Redis: the caller adds it.

``export_rows`` gives the rows of `trawler export --postgres` (store/postgres.py
``iter_pages``: the same columns, order and robots.txt merge).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg

from trawler.outcome import NOT_HTML
from trawler.store.kinds import EXPORT_KINDS, ROBOTS, ROBOTS_COLUMNS, merge_rows, robots_export_row
from trawler.store.sqlite_export import EXPORT_COLUMNS
from trawler.store.sqlite_read import PAGE_ROWS_MAX, PageFilter

FAILED = f"error IS NOT NULL AND error <> '{NOT_HTML}'"


def _one(conn: psycopg.Connection, sql: str, args: tuple | list = ()) -> Any:
    row = conn.execute(sql, args).fetchone()
    return row[0] if row is not None and row[0] is not None else 0


def export_rows(
    conn: psycopg.Connection, job_id: str, include_noindex: bool, kinds: frozenset[str]
) -> Iterator[dict]:
    """Export rows in commit order, robots.txt fetches merged in by fetch time, through
    server-side cursors in the connection's transaction: flat memory for any size."""
    page_kinds = [name for name in EXPORT_KINDS if name in kinds and name != ROBOTS]
    where = "job_id = %s AND kind = ANY(%s)" + ("" if include_noindex else " AND NOT noindex")
    pages = _stream(
        conn, f"SELECT {', '.join(EXPORT_COLUMNS)} FROM pages WHERE {where} ORDER BY id",
        (job_id, page_kinds),
    )  # fmt: skip
    rows: Iterator[dict] = (dict(zip(EXPORT_COLUMNS, values, strict=True)) for values in pages)
    if ROBOTS in kinds:
        robots = _stream(
            conn, f"SELECT {', '.join(ROBOTS_COLUMNS)} FROM robots_fetches"
            " WHERE job_id = %s ORDER BY id", (job_id,),
        )  # fmt: skip
        rows = merge_rows(rows, (robots_export_row(values, EXPORT_COLUMNS) for values in robots))
    return rows


def _stream(conn: psycopg.Connection, sql: str, args: tuple) -> Iterator[tuple]:
    with conn.cursor(name=f"api_{uuid.uuid4().hex[:8]}") as cursor:
        cursor.itersize = 1000
        cursor.execute(sql, args)
        yield from cursor


def page_rows(
    conn: psycopg.Connection, job_id: str, wanted: PageFilter, offset: int, limit: int,
    newest_first: bool = False,
) -> tuple[list[dict], int]:  # fmt: skip
    """Export rows of the pages ``wanted`` keeps, in commit order (or its reverse), and
    how many in all."""
    clauses = ["job_id = %s"]
    args: list[Any] = [job_id]
    for sql, value in (("host = %s", wanted.host), ("status = %s", wanted.status),
                       ("kind = %s", wanted.kind), ("fetched_at >= %s", wanted.since),
                       ("fetched_at < %s", wanted.until)):  # fmt: skip
        if value is not None:
            clauses.append(sql)
            args.append(value)
    if wanted.failed is not None:
        clauses.append(FAILED if wanted.failed else f"NOT ({FAILED})")
    where = " AND ".join(clauses)
    total = int(_one(conn, f"SELECT count(*) FROM pages WHERE {where}", args))
    cursor = conn.execute(
        f"SELECT {', '.join(EXPORT_COLUMNS)} FROM pages WHERE {where}"
        f" ORDER BY id{' DESC' if newest_first else ''} LIMIT %s OFFSET %s",
        (*args, min(limit, PAGE_ROWS_MAX), offset),
    )
    return [dict(zip(EXPORT_COLUMNS, values, strict=True)) for values in cursor], total


def error_rows(
    conn: psycopg.Connection, job_id: str, limit: int, code: str | None = None,
    host: str | None = None, counted: bool = True,
) -> tuple[list[dict], dict]:  # fmt: skip
    """The ``limit`` latest failed fetches (of that error ``code``, that ``host``),
    newest first, and the count of each error code over the whole job (none unless
    ``counted``)."""
    names = ("url", "error", "status", "fetched_at", "attempts", "host")
    where, args = f"job_id = %s AND {FAILED}", [job_id]
    for sql, value in (("error = %s", code), ("host = %s", host)):
        if value is not None:
            where += f" AND {sql}"
            args.append(value)
    cursor = conn.execute(
        f"SELECT {', '.join(names)} FROM pages WHERE {where} ORDER BY id DESC LIMIT %s",
        (*args, limit),
    )
    latest = [dict(zip(names, row, strict=True)) for row in cursor]
    if not counted:
        return latest, {}
    counts = conn.execute(
        f"SELECT error, count(*) FROM pages WHERE job_id = %s AND {FAILED}"
        " GROUP BY 1 ORDER BY 2 DESC, 1",
        (job_id,),
    )
    return latest, {code: count for code, count in counts}


def url_report(conn: psycopg.Connection, job_id: str, url: str) -> dict | None:
    """What PostgreSQL knows of a normalised URL: its stored page and fetch history,
    and how many stored pages it led to. None when nothing is stored of it."""
    page = conn.execute(
        "SELECT status, content_sha256, links_count, error, fetched_at, depth, parent_url,"
        " kind, host FROM pages WHERE job_id = %s AND url = %s",
        (job_id, url),
    ).fetchone()
    names = ("attempt", "started_at", "duration_s", "status", "error", "decision")
    history = conn.execute(
        f"SELECT {', '.join(names)} FROM fetch_attempts WHERE job_id = %s AND url = %s ORDER BY id",
        (job_id, url),
    )
    fetches = [dict(zip(names, row, strict=True)) for row in history]
    if page is None and not fetches:
        return None
    discovered = _one(
        conn, "SELECT count(*) FROM pages WHERE job_id = %s AND parent_url = %s", (job_id, url)
    )
    status, sha, links, error, fetched_at, depth, parent, kind, _host = page or (None,) * 9
    return {
        "state": "done" if page else "queued", "depth": depth, "skip_reason": None,
        "kind": kind, "parent_url": parent, "status": status, "content_sha256": sha,
        "error": error, "fetched_at": fetched_at, "fetches": fetches, "outbound_links": links,
        "inbound_links": 1 if parent else 0, "urls_discovered": int(discovered),
    }  # fmt: skip


def host_numbers(conn: psycopg.Connection, job_id: str, hosts: list[str]) -> dict[str, tuple]:
    """host -> (fetched, failed, mean fetch seconds) of the stored pages."""
    rows = conn.execute(
        f"SELECT host, count(*), count(*) FILTER (WHERE {FAILED}), avg(fetch_duration_s)"
        " FROM pages WHERE job_id = %s AND host = ANY(%s) GROUP BY host",
        (job_id, hosts),
    )
    return {row[0]: tuple(row[1:]) for row in rows}


def stored_hosts(
    conn: psycopg.Connection, job_id: str, offset: int, limit: int
) -> tuple[list[str], int]:
    """The hosts with a stored page, by name, and how many there are."""
    total = int(_one(conn, "SELECT count(DISTINCT host) FROM pages WHERE job_id = %s", (job_id,)))
    rows = conn.execute(
        "SELECT DISTINCT host FROM pages WHERE job_id = %s AND host IS NOT NULL"
        " ORDER BY host LIMIT %s OFFSET %s",
        (job_id, limit, offset),
    )
    return [row[0] for row in rows], total


# /hosts?sort= by the stored pages (sqlite_hosts.HOST_ORDERS; queued: Redis's, the caller's).
HOST_ORDERS = {
    "fetched": "count(*) DESC, host",
    "errors": f"count(*) FILTER (WHERE {FAILED}) DESC, host",
    "error_rate": f"round(count(*) FILTER (WHERE {FAILED})::numeric / count(*), 4) DESC, host",
    "mean_response_s": "avg(fetch_duration_s) IS NULL,"
    " round(avg(fetch_duration_s)::numeric, 4) DESC, host",
}


def sorted_hosts(
    conn: psycopg.Connection, job_id: str, sort: str, offset: int, limit: int
) -> list[str]:
    """The hosts with a stored page, in ``sort`` order (HOST_ORDERS), a page of them."""
    rows = conn.execute(
        "SELECT host FROM pages WHERE job_id = %s AND host IS NOT NULL GROUP BY host"
        f" ORDER BY {HOST_ORDERS[sort]} LIMIT %s OFFSET %s",
        (job_id, limit, offset),
    )
    return [row[0] for row in rows]


def all_hosts(conn: psycopg.Connection, job_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT host FROM pages WHERE job_id = %s AND host IS NOT NULL", (job_id,)
    )
    return [row[0] for row in rows]


def robots_summaries(conn: psycopg.Connection, job_id: str, hosts: list[str]) -> dict[str, tuple]:
    """host -> (status, error) of its newest robots.txt download (none: absent)."""
    rows = conn.execute(
        "SELECT DISTINCT ON (host) host, status, error FROM robots_fetches"
        " WHERE job_id = %s AND host = ANY(%s) ORDER BY host, id DESC",
        (job_id, hosts),
    )
    return {host: (status, error) for host, status, error in rows}


def host_robots(conn: psycopg.Connection, job_id: str, host: str) -> list[dict]:
    """The robots.txt downloads of the host, newest first (Crawl-delay: not kept here)."""
    rows = conn.execute(
        "SELECT url, status, error, coalesce(fetched_at, 0) FROM robots_fetches"
        " WHERE job_id = %s AND host = %s ORDER BY id DESC LIMIT 10",
        (job_id, host),
    )
    return [{"robots_url": url, "status": status, "error": error, "crawl_delay": None,
             "fetched_at": at} for url, status, error, at in rows]  # fmt: skip


def activity(conn: psycopg.Connection, job_id: str, now: float) -> dict:
    """Throughput over the last 10 s, 1 and 5 minutes, the last hour's fetches and
    failures, storage, and the URLs visited (the queue's pending count: Redis). The
    short windows read the index by fetch time; the hour, ``hour_counts``; the totals
    are kept."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE fetched_at >= %s), count(*) FILTER (WHERE fetched_at >= %s),"
        " count(*) FROM pages WHERE job_id = %s AND fetched_at >= %s",
        (now - 10, now - 60, job_id, now - 300),
    ).fetchone()  # fmt: skip
    last10, last60, last300 = row or (0,) * 3
    hour, failed = hour_counts(conn, job_id, now - 3600)
    pages, size, _failed = page_totals(conn, job_id)
    return {
        "throughput": {"now": round(last10 / 10, 3), "last_1m": round(last60 / 60, 3),
                       "last_5m": round(last300 / 300, 3)},
        "errors": {"last_hour": int(failed), "fetched_last_hour": int(hour)},
        "storage": {"pages": int(pages), "bytes": int(size)},
        "queue": {"pending": 0, "visited": int(pages)},
    }  # fmt: skip


def hour_counts(conn: psycopg.Connection, job_id: str, since: float) -> tuple[int, int]:
    """(pages, failed) fetched at or after ``since``: the kept minutes after since's
    minute m (page_minutes, pgschema_steps.py), and the pages of minute m itself at or after
    ``since`` (the index by fetch time, under a minute of it). Exact: floor(f / 60) is
    monotonic in f, so a page at or after ``since`` is in minute m or a later one, and
    a page of a later minute is at or after ``since``."""
    row = conn.execute(
        "SELECT coalesce(sum(pages), 0), coalesce(sum(failed), 0) FROM page_minutes"
        " WHERE job_id = %s AND minute > floor(%s::float8 / 60)",
        (job_id, since),
    ).fetchone()
    edge = conn.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {FAILED}) FROM pages WHERE job_id = %s"
        " AND fetched_at >= %s AND fetched_at < (floor(%s::float8 / 60) + 2) * 60"
        " AND floor(fetched_at / 60) = floor(%s::float8 / 60)",
        (job_id, since, since, since),
    ).fetchone()
    assert row is not None and edge is not None
    return int(row[0]) + int(edge[0]), int(row[1]) + int(edge[1])


def page_totals(conn: psycopg.Connection, job_id: str) -> tuple[int, int, int]:
    """(pages, body bytes, failed fetches) of the job: kept by a trigger (pgschema_steps.py)."""
    row = conn.execute(
        "SELECT pages, bytes, failed FROM page_totals WHERE job_id = %s", (job_id,)
    ).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row is not None else (0, 0, 0)


def per_second(conn: psycopg.Connection, job_id: str, start: float, end: float) -> list[tuple]:
    """(second, status class or 0, failed, pages, body bytes) for pages fetched in
    [start, end)."""
    return conn.execute(
        "SELECT floor(fetched_at)::bigint, coalesce(status / 100, 0),"
        f" {FAILED}, count(*), coalesce(sum(content_length), 0)::bigint FROM pages"
        " WHERE job_id = %s"
        " AND fetched_at >= %s AND fetched_at < %s GROUP BY 1, 2, 3",
        (job_id, start, end),
    ).fetchall()


def metric_numbers(conn: psycopg.Connection, job_id: str) -> dict:
    """Totals for /metrics (frontier and active hosts: Redis's, filled in by the caller)."""

    def grouped(sql: str) -> dict:
        return dict(conn.execute(sql, (job_id,)).fetchall())

    pages, size = conn.execute(
        "SELECT count(*), coalesce(sum(content_length), 0) FROM pages WHERE job_id = %s",
        (job_id,),
    ).fetchone() or (0, 0)
    return {
        "pages": pages, "bytes": size,
        "status_classes": grouped("SELECT (status / 100) || 'xx', count(*) FROM pages"
                                  " WHERE job_id = %s AND status IS NOT NULL GROUP BY 1"),
        "errors": grouped(f"SELECT error, count(*) FROM pages WHERE job_id = %s AND {FAILED}"
                          " GROUP BY 1"),
        "robots_denied": _one(conn, "SELECT coalesce(sum(value), 0) FROM counters WHERE"
                              " job_id = %s AND name IN ('rejected.robots', 'skipped.robots')",
                              (job_id,)),
        "frontier": 0, "active_hosts": 0,
    }  # fmt: skip


def fetch_durations(
    conn: psycopg.Connection, job_id: str, bounds: tuple[float, ...]
) -> tuple[list, float, int]:
    """Cumulative counts of fetch attempts at or under each bound, their sum, their count."""
    counts = ", ".join(f"count(*) FILTER (WHERE duration_s <= {float(b)!r})" for b in bounds)
    row = conn.execute(
        f"SELECT {counts}, coalesce(sum(duration_s), 0), count(*) FROM fetch_attempts"
        " WHERE job_id = %s AND duration_s IS NOT NULL",
        (job_id,),
    ).fetchone()
    assert row is not None
    return list(row[: len(bounds)]), float(row[-2]), int(row[-1])


def job_numbers(conn: psycopg.Connection, job_ids: list[str]) -> dict[str, tuple]:
    """job -> (pages crawled, errors, pages a second over the last minute of fetching)."""
    rows = conn.execute(
        "SELECT job_id, pages, failed, (SELECT max(fetched_at) FROM pages p"
        " WHERE p.job_id = t.job_id) FROM page_totals t WHERE job_id = ANY(%s) AND pages > 0",
        (job_ids,),
    ).fetchall()
    found = {}
    for job_id, pages, errors, last in rows:
        found[job_id] = (pages, errors, _pace(conn, job_id, last) if last is not None else 0.0)
    return found


def _pace(conn: psycopg.Connection, job_id: str, last: float, window_s: float = 60.0) -> float:
    count, first = conn.execute(
        "SELECT count(*), min(fetched_at) FROM pages WHERE job_id = %s AND fetched_at > %s",
        (job_id, last - window_s),
    ).fetchone() or (0, None)
    span = last - first if first is not None else 0
    return round((count - 1) / span, 3) if count > 1 and span > 0 else 0.0
