"""The distributed store's read side for `trawler stats`: one job's numbers from
PostgreSQL, in the shape of ``trawler.store.sqlite_export.read_stats``."""

from __future__ import annotations

import psycopg

from trawler.outcome import NOT_HTML
from trawler.store.kinds import ROBOTS


async def _fetchall(conn: psycopg.AsyncConnection, sql: str, job_id: str) -> list[tuple]:
    cur = await conn.execute(sql, (job_id,))
    return await cur.fetchall()


async def _grouped(
    conn: psycopg.AsyncConnection, job_id: str, column: str, table: str
) -> dict[str, int]:
    sql = (
        f"SELECT {column}, count(*) FROM {table} WHERE job_id = %s AND {column} IS NOT NULL"
        " GROUP BY 1 ORDER BY 2 DESC"
    )
    return {str(key): count for key, count in await _fetchall(conn, sql, job_id)}


async def read_stats(conn: psycopg.AsyncConnection, job_id: str) -> dict:
    """One job's numbers (see ``PostgresStore.read_stats``)."""
    stats: dict = {"job": None}
    job = await _fetchall(
        conn,
        "SELECT id, state, extract(epoch FROM created_at)::float8,"
        " extract(epoch FROM updated_at)::float8,"
        " (SELECT count(*) FROM job_scope_hosts WHERE job_id = jobs.id) FROM jobs WHERE id = %s",
        job_id,
    )
    if job:
        stats["job"] = dict(zip(("id", "state", "created_at", "updated_at"), job[0], strict=False))
        stats["job"]["seed_hosts"] = job[0][4]
    stats["urls_discovered"] = stats["urls_queued"] = None  # the frontier's numbers
    ((stored, ok, size, first, last, hosts),) = await _fetchall(
        conn,
        "SELECT count(*), count(*) FILTER (WHERE error IS NULL), sum(content_length),"
        " min(fetched_at), max(fetched_at), count(DISTINCT host) FROM pages WHERE job_id = %s",
        job_id,
    )
    # hosts: those with a stored page (the frontier knows queued ones only by job).
    stats.update(pages_stored=stored, pages_ok=ok, bytes_downloaded=int(size or 0), hosts=hosts)
    stats["status"] = await _grouped(conn, job_id, "status", "pages")
    # A non-HTML download is no error: counted apart.
    stats["errors"] = await _grouped(conn, job_id, "error", "pages")
    stats["not_html"] = stats["errors"].pop(NOT_HTML, 0)
    stats["kinds"] = await _grouped(conn, job_id, "kind", "pages")
    robots = await _fetchall(conn, "SELECT count(*) FROM robots_fetches WHERE job_id = %s", job_id)
    if robots[0][0]:
        stats["kinds"][ROBOTS] = robots[0][0]
    counters = dict(
        await _fetchall(
            conn, "SELECT name, value FROM counters WHERE job_id = %s ORDER BY name", job_id
        )
    )
    prefix = "skipped."
    stats["skipped"] = {
        name.removeprefix(prefix): value
        for name, value in sorted(counters.items(), key=lambda item: -item[1])
        if name.startswith(prefix)
    }
    stats["dead_letter"] = counters.get("dead_letter", 0)  # counted at each commit
    stats["fetch_attempts"] = await _grouped(conn, job_id, "decision", "fetch_attempts")
    stats["counters"] = counters
    if first is not None and last > first:
        stats["pages_per_s"] = round(stored / (last - first), 1)
    return stats
