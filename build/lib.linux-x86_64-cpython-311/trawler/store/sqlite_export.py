"""The read side of the embedded store for `trawler export` and `trawler stats`,
on a read-only connection of its own (sqlite.connect(readonly=True)): export
rows streamed in commit order, and the aggregate numbers of a job."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence

from trawler.outcome import NOT_HTML
from trawler.store.kinds import (
    DEFAULT_EXPORT_KINDS,
    EXPORT_KINDS,
    ROBOTS,
    ROBOTS_COLUMNS,
    merge_rows,
    robots_export_row,
)
from trawler.store.sqlite_schema import (
    DEAD,
    IS_LISTED_SITEMAP,
    QUEUED,
    RESERVATION_COLUMNS,
    SKIPPED,
    has_column,
    has_table,
)

EXPORT_COLUMNS = (
    "url", "final_url", "status", "content_type", "content_length", "depth", "parent_url",
    "title", "description", "keywords", "links_count", "content_sha256", "fetched_at",
    "fetch_duration_s", "canonical", "noindex", "duplicate_of", "simhash", "sitemap_lastmod",
    "sitemap_changefreq", "rendered", "tdm_reservation", "tdm_policy", "tdm_source",
    "ai_robots_groups", "ai_robots_disallowed", "error", "warc_file", "warc_offset", "kind",
)  # fmt: skip
# Export columns a data directory of an older Trawler opened read-only lacks (a writer
# adds them: sqlite.connect): read as NULL.
LATER_COLUMNS = frozenset({"sitemap_changefreq", "rendered", *RESERVATION_COLUMNS})


def typed_row(row: dict) -> dict:
    """An export row read from SQLite, its booleans (stored as 0/1) as booleans."""
    row["noindex"] = bool(row["noindex"])
    if row["tdm_reservation"] is not None:
        row["tdm_reservation"] = bool(row["tdm_reservation"])
    return row


def select_list(columns: Sequence[str], has: Callable[[str], bool]) -> str:
    """``columns`` for a SELECT, each of ``LATER_COLUMNS`` the store lacks as NULL."""
    return ", ".join(c if c not in LATER_COLUMNS or has(c) else f"NULL AS {c}" for c in columns)


def page_columns(conn: sqlite3.Connection) -> str:
    """The export's columns but ``kind``, as a SELECT over ``pages`` reads them."""
    return select_list(EXPORT_COLUMNS[:-1], lambda column: has_column(conn, "pages", column))


def iter_pages(
    conn: sqlite3.Connection,
    include_noindex: bool = False,
    kinds: frozenset[str] = DEFAULT_EXPORT_KINDS,
    with_text: bool = False,
) -> Iterator[dict]:
    """Stream export rows of these kinds: pages in commit order, robots.txt fetches
    merged in by fetch time; memory stays flat however large the crawl. ``with_text``:
    a ``text`` column too (a page's main text; None for robots.txt fetches)."""
    columns = (*EXPORT_COLUMNS, "text") if with_text else EXPORT_COLUMNS
    pages = _iter_page_rows(conn, include_noindex, kinds - {ROBOTS}, columns)
    if ROBOTS not in kinds or not has_table(conn, "robots_fetches"):
        return pages
    sql = f"SELECT {', '.join(ROBOTS_COLUMNS)} FROM robots_fetches ORDER BY id"
    robots = (robots_export_row(row, columns) for row in conn.execute(sql))
    return merge_rows(pages, robots)


def _iter_page_rows(
    conn: sqlite3.Connection, include_noindex: bool, kinds: frozenset[str],
    columns: tuple[str, ...],
) -> Iterator[dict]:  # fmt: skip
    if not kinds:
        return
    kind = kind_expression(conn)
    wanted = ", ".join(f"'{name}'" for name in EXPORT_KINDS if name in kinds)  # known names
    where = f"{kind} IN ({wanted})" + ("" if include_noindex else " AND NOT noindex")
    text = ", text" if "text" in columns else ""
    sql = f"SELECT {page_columns(conn)}, {kind}{text} FROM pages WHERE {where} ORDER BY id"
    for row in conn.execute(sql):
        yield typed_row(dict(zip(columns, row, strict=True)))


def kind_expression(conn: sqlite3.Connection) -> str:
    """The `kind` column, or, read-only in a data directory from before kinds, the same
    answer from the URL table (a writer migrates: `sqlite_schema.add_page_kinds`)."""
    if has_column(conn, "pages", "kind"):
        return "kind"
    return f"(CASE WHEN {IS_LISTED_SITEMAP} THEN 'sitemap' ELSE 'page' END)"


def _scalar(conn: sqlite3.Connection, sql: str) -> int:
    return conn.execute(sql).fetchone()[0] or 0


def _grouped(conn: sqlite3.Connection, column: str, table: str, where: str) -> dict[str, int]:
    sql = f"SELECT {column}, count(*) FROM {table} WHERE {where} GROUP BY 1 ORDER BY 2 DESC"
    return {str(key): count for key, count in conn.execute(sql)}


def read_stats(conn: sqlite3.Connection) -> dict:
    """Aggregate numbers for `trawler stats`."""
    job = conn.execute(
        "SELECT id, state, created_at, updated_at FROM jobs ORDER BY created_at DESC"
    ).fetchone()
    stats: dict = {"job": None}
    if job is not None:
        stats["job"] = dict(zip(("id", "state", "created_at", "updated_at"), job, strict=False))
        try:
            stats["job"]["seed_hosts"] = _scalar(conn, "SELECT count(*) FROM scope_hosts")
        except sqlite3.OperationalError:  # a database of an older Trawler, read-only
            stats["job"]["seed_hosts"] = None
    stats["urls_discovered"] = _scalar(conn, "SELECT count(*) FROM urls")
    stats["urls_queued"] = _scalar(conn, f"SELECT count(*) FROM urls WHERE state = {QUEUED}")
    stats["pages_stored"] = _scalar(conn, "SELECT count(*) FROM pages")
    stats["pages_ok"] = _scalar(conn, "SELECT count(*) FROM pages WHERE error IS NULL")
    stats["bytes_downloaded"] = _scalar(conn, "SELECT sum(content_length) FROM pages")
    stats["hosts"] = _scalar(conn, "SELECT count(DISTINCT host) FROM urls")
    stats["status"] = _grouped(conn, "status", "pages", "status IS NOT NULL")
    stats["errors"] = _grouped(conn, "error", "pages", "error IS NOT NULL")
    # A non-HTML download is no error: counted apart (pages_stored = pages_ok + not_html
    # + the errors).
    stats["not_html"] = stats["errors"].pop(NOT_HTML, 0)
    stats["kinds"] = _grouped(conn, kind_expression(conn), "pages", "1")
    robots = has_table(conn, "robots_fetches") and _scalar(
        conn, "SELECT count(*) FROM robots_fetches"
    )
    if robots:
        stats["kinds"][ROBOTS] = robots
    stats["skipped"] = _grouped(conn, "reason", "urls", f"state = {SKIPPED}")
    stats["dead_letter"] = _scalar(conn, f"SELECT count(*) FROM urls WHERE state = {DEAD}")
    stats["fetch_attempts"] = _grouped(conn, "decision", "fetch_attempts", "1")
    stats["counters"] = dict(conn.execute("SELECT name, value FROM counters ORDER BY name"))
    first, last = conn.execute("SELECT min(fetched_at), max(fetched_at) FROM pages").fetchone()
    if first is not None and last > first:
        stats["pages_per_s"] = round(stats["pages_stored"] / (last - first), 1)
    return stats
