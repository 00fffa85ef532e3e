"""Reuse reservations per host (issue 18): `trawler export --hosts` and the fields
``GET /jobs/{id}/hosts`` adds to each host, from what the crawl stored already
(no write of its own on the crawl's path):

- ``pages``: the host's stored pages (kind ``page``);
- ``robots_status`` / ``robots_error``: its newest robots.txt download;
- ``ai_robots_groups`` / ``ai_robots_disallowed``: the AI crawlers its robots.txt has
  a group for, and those disallowed from ``/`` (tdmrep.py), as its newest page
  annotated with them says;
- ``tdmrep_json``: its ``/.well-known/tdmrep.json``: ``found`` (``tdmrep_rules``
  says how many rules), ``absent`` (no 2xx answer), ``malformed``, ``not_fetched``;
  ``tdm_reservation`` / ``tdm_policy``: what the file says of ``/``.

The embedded store keeps each origin's tdmrep.json body (table ``robots``, tdmgate.py).
PostgreSQL does not (the distributed workers share it through Redis, for a day): there
the file is ``found`` when a page took its reservation from it, ``unknown`` otherwise,
and the reservation of ``/`` is the root page's when it came from the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, TextIO

from trawler.store.sqlite import has_table
from trawler.tdmrep import (
    KEPT_PROFILE_SUFFIX,
    SOURCE_FILE,
    TdmRepError,
    file_reservation,
    parse_tdmrep,
)
from trawler.urls import host_key

if TYPE_CHECKING:
    import psycopg

HOST_COLUMNS = (
    "host", "pages", "robots_status", "robots_error", "ai_robots_groups",
    "ai_robots_disallowed", "tdmrep_json", "tdmrep_rules", "tdm_reservation", "tdm_policy",
)  # fmt: skip
# The fields GET /jobs/{id}/hosts adds to a host's row.
RESERVATION_FIELDS = HOST_COLUMNS[4:]
FOUND, ABSENT, MALFORMED, NOT_FETCHED, UNKNOWN = (
    "found", "absent", "malformed", "not_fetched", "unknown",
)  # fmt: skip

# Bare columns beside max(): SQLite takes them from the row with the maximum, here
# the newest page annotated with the host's robots.txt groups.
_SQLITE_PAGES = (
    "SELECT host, sum(kind = 'page'),"
    " max(CASE WHEN ai_robots_groups IS NOT NULL THEN fetched_at END),"
    " ai_robots_groups, ai_robots_disallowed FROM pages WHERE host IS NOT NULL{only} GROUP BY host"
)
_SQLITE_ROBOTS = (
    "SELECT host, status, error FROM robots_fetches WHERE id IN"
    " (SELECT max(id) FROM robots_fetches GROUP BY host){only}"
)


def _only(hosts: list[str] | None, column: str = "host") -> tuple[str, list[str]]:
    if hosts is None:
        return "", []
    return f" AND {column} IN ({', '.join('?' for _ in hosts)})", hosts


def host_reservations(conn: sqlite3.Connection, hosts: list[str] | None = None) -> dict[str, dict]:
    """host -> its row (HOST_COLUMNS) of the embedded store, every host or ``hosts``."""
    only, args = _only(hosts)
    rows: dict[str, dict] = {}
    for host, pages, _at, groups, disallowed in conn.execute(_SQLITE_PAGES.format(only=only), args):
        rows[host] = _row(host, pages, groups, disallowed)
    for host, status, error in conn.execute(_SQLITE_ROBOTS.format(only=only), args):
        row = rows.setdefault(host, _row(host, 0, None, None))
        row["robots_status"], row["robots_error"] = status, error
    files = _kept_files(conn)
    for host in hosts or ():
        rows.setdefault(host, _row(host, 0, None, None))
    for host, row in rows.items():
        row.update(files.get(host, {"tdmrep_json": NOT_FETCHED}))
    return rows


def _row(host: str, pages: int | None, groups: str | None, disallowed: str | None) -> dict:
    row = dict.fromkeys(HOST_COLUMNS)
    row.update(host=host, pages=int(pages or 0), ai_robots_groups=groups,
               ai_robots_disallowed=disallowed)  # fmt: skip
    return row


def _kept_files(conn: sqlite3.Connection) -> dict[str, dict]:
    """host -> what its origin's kept tdmrep.json says (tdmgate.py keeps one per origin
    and fetch profile; the newest of a host's wins)."""
    if not has_table(conn, "robots"):
        return {}
    found: dict[str, dict] = {}
    rows = conn.execute(
        "SELECT site, status, error, body FROM robots WHERE profile LIKE ? ORDER BY fetched_at",
        (f"%{KEPT_PROFILE_SUFFIX}",),
    )
    for site, status, error, body in rows:
        found[host_key(site + "/")] = file_state(site, status, error, bytes(body))
    return found


def file_state(site: str, status: int | None, error: str | None, body: bytes) -> dict:
    """The ``tdmrep_*`` and ``tdm_*`` fields of a kept tdmrep.json answer (tdmgate.py
    reads it the same way: a non-2xx answer or an error is no file)."""
    if error is not None or status is None or not 200 <= status < 300:
        return {"tdmrep_json": ABSENT, "tdmrep_rules": None}
    try:
        rules = parse_tdmrep(body)
    except TdmRepError:
        return {"tdmrep_json": MALFORMED, "tdmrep_rules": None}
    root = file_reservation(rules, site + "/")
    return {"tdmrep_json": FOUND, "tdmrep_rules": len(rules),
            "tdm_reservation": root.reserved, "tdm_policy": root.policy}  # fmt: skip


def with_reservations(rows: list[dict], found: dict[str, dict]) -> list[dict]:
    """The API's host rows with their ``RESERVATION_FIELDS`` (``found``: by host)."""
    for row in rows:
        kept = found.get(row["host"], {})
        row.update({name: kept.get(name) for name in RESERVATION_FIELDS})
    return rows


def iter_hosts(conn: sqlite3.Connection) -> Iterator[dict]:
    """The embedded store's host rows, by name (a row per host: the hosts of one job
    fit in memory where its pages might not)."""
    rows = host_reservations(conn)
    for host in sorted(rows):
        yield rows[host]


def write_hosts(conn: sqlite3.Connection, out: TextIO, fmt: str) -> int:
    """`trawler export --hosts` of the data directory; returns the rows written."""
    from trawler.export import write_rows

    return write_rows(iter_hosts(conn), out, fmt, HOST_COLUMNS)


# -- PostgreSQL ----------------------------------------------------------------------
_PG_PAGES = (
    "SELECT host, count(*) FILTER (WHERE kind = 'page'), bool_or(tdm_source = %s)"
    " FROM pages WHERE job_id = %s AND host IS NOT NULL{only} GROUP BY host"
)
_PG_GROUPS = (
    "SELECT DISTINCT ON (host) host, ai_robots_groups, ai_robots_disallowed FROM pages"
    " WHERE job_id = %s AND ai_robots_groups IS NOT NULL{only} ORDER BY host, fetched_at DESC"
)
_PG_ROBOTS = (
    "SELECT DISTINCT ON (host) host, status, error FROM robots_fetches"
    " WHERE job_id = %s{only} ORDER BY host, id DESC"
)
# The root page's reservation when the file gave it: what the file says of "/".
_PG_ROOT = (
    "SELECT host, tdm_reservation, tdm_policy FROM pages WHERE job_id = %s AND tdm_source = %s"
    " AND url IN (SELECT 'http://' || host || '/' UNION SELECT 'https://' || host || '/'){only}"
)


def _pg_queries(job_id: str, hosts: list[str] | None) -> list[tuple[str, tuple]]:
    only, extra = ("", ()) if hosts is None else (" AND host = ANY(%s)", (hosts,))
    return [
        (_PG_PAGES.format(only=only), (SOURCE_FILE, job_id, *extra)),
        (_PG_GROUPS.format(only=only), (job_id, *extra)),
        (_PG_ROBOTS.format(only=only), (job_id, *extra)),
        (_PG_ROOT.format(only=only), (job_id, SOURCE_FILE, *extra)),
    ]


def _pg_rows(results: list[list[tuple]], hosts: list[str] | None) -> dict[str, dict]:
    pages, groups, robots, roots = results
    rows = {host: _row(host, count, None, None) for host, count, _ in pages}
    for host in hosts or ():
        rows.setdefault(host, _row(host, 0, None, None))
    for host, _count, cited in pages:
        rows[host]["tdmrep_json"] = FOUND if cited else UNKNOWN
    for host, named, disallowed in groups:
        rows[host].update(ai_robots_groups=named, ai_robots_disallowed=disallowed)
    for host, status, error in robots:
        row = rows.setdefault(host, _row(host, 0, None, None))
        row.update(robots_status=status, robots_error=error)
    for host, reserved, policy in roots:
        rows[host].update(tdm_reservation=reserved, tdm_policy=policy)
    for row in rows.values():
        row["tdmrep_json"] = row["tdmrep_json"] or UNKNOWN
    return rows


def pg_host_reservations(
    conn: psycopg.Connection, job_id: str, hosts: list[str] | None = None
) -> dict[str, dict]:
    """host -> its row of a distributed job (api/pgreader.py's connection)."""
    results = [conn.execute(sql, args).fetchall() for sql, args in _pg_queries(job_id, hosts)]
    return _pg_rows(results, hosts)


async def aiter_hosts(conn: psycopg.AsyncConnection, job_id: str) -> AsyncIterator[dict]:
    """A distributed job's host rows, by name."""
    results = []
    for sql, args in _pg_queries(job_id, None):
        cursor = await conn.execute(sql, args)
        results.append(await cursor.fetchall())
    rows = _pg_rows(results, None)
    for host in sorted(rows):
        yield rows[host]
