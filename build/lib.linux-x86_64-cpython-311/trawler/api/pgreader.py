"""``JobReader`` over PostgreSQL and the job's shared frontier in Redis (the
distributed backend), for one request: a pooled connection in one read-only
transaction (one snapshot; server-side cursors for the export), and a Redis view
for the numbers only the frontier has. Each method is one read of
store/postgres_read.py; this class binds them to the job and turns a failing
server into ``StoreUnavailable``.

``search`` reads PostgreSQL's full-text index (store/pg_search.py, issue 17).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType

import psycopg
import redis
from psycopg_pool import ConnectionPool

from trawler.api.deps import StoreUnavailable
from trawler.config import CrawlConfig
from trawler.export_hosts import pg_host_reservations, with_reservations
from trawler.frontier.redis_view import FrontierView
from trawler.jobs.model import UnknownJob
from trawler.store import pg_graph, pg_provenance, pg_search
from trawler.store import pg_versions_read as pv
from trawler.store import postgres_read as pg
from trawler.store.search import SearchHit
from trawler.store.sqlite_export import EXPORT_COLUMNS
from trawler.store.sqlite_hosts import current_interval_s, host_row
from trawler.store.sqlite_read import PageFilter
from trawler.store.tdm_read import pg_page_reservation
from trawler.urls import host_key

_FAILURES = (psycopg.OperationalError, psycopg.InterfaceError, redis.ConnectionError,
             redis.TimeoutError)  # fmt: skip


class PostgresJobReader:
    def __init__(
        self, pool: ConnectionPool, conn: psycopg.Connection, job_id: str,
        config: CrawlConfig, frontier: FrontierView,
    ) -> None:  # fmt: skip
        self.pool, self.conn = pool, conn
        self.job_id, self.config, self.frontier = job_id, config, frontier

    @classmethod
    def open(cls, pool: ConnectionPool, job_id: str, frontier: FrontierView) -> PostgresJobReader:
        from trawler.config import stored_config

        try:
            conn = pool.getconn()
        except psycopg.OperationalError as exc:  # PoolTimeout: the server is down
            raise StoreUnavailable(f"cannot read PostgreSQL: {exc}") from None
        try:
            conn.read_only = True
            row = conn.execute("SELECT config FROM jobs WHERE id = %s", (job_id,)).fetchone()
        except _FAILURES as exc:
            _give_back(pool, conn)
            raise StoreUnavailable(f"cannot read PostgreSQL: {exc}") from None
        if row is None:
            _give_back(pool, conn)
            raise UnknownJob(job_id)
        return cls(pool, conn, job_id, stored_config(row[0])[0], frontier)

    def __enter__(self) -> PostgresJobReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        if isinstance(exc, _FAILURES):  # a server failed under us: the store's fault
            raise StoreUnavailable(f"cannot read the data of job {self.job_id}: {exc}") from exc

    def close(self) -> None:
        conn, self.conn = self.conn, None  # type: ignore[assignment]
        if conn is not None:
            _give_back(self.pool, conn)

    def export_rows(
        self, include_noindex: bool, kinds: frozenset[str], versions: str = "latest"
    ) -> Iterator[dict]:
        rows = pg.export_rows(self.conn, self.job_id, include_noindex, kinds)
        if not pv.has_versions(self.conn, self.job_id):
            return rows  # never revisited, or nothing changed: the pages are the versions
        return pv.versioned_rows(self.conn, self.job_id, rows, versions)

    def export_columns(self) -> tuple[str, ...]:
        if pv.has_versions(self.conn, self.job_id):
            return (*EXPORT_COLUMNS, "version")
        return EXPORT_COLUMNS

    def versions(self, url: str, text: bool) -> list[dict]:
        rows = pv.versions_of(self.conn, self.job_id, url, latest_only=False)
        for row in rows if not text else ():
            row.pop("text")
        return rows

    def pages(
        self, wanted: PageFilter, offset: int, limit: int, newest_first: bool = False
    ) -> tuple[list[dict], int]:
        if wanted.host is not None and "\x00" in wanted.host:
            return [], 0  # PostgreSQL text holds no NUL: no page has that host
        return pg.page_rows(self.conn, self.job_id, wanted, offset, limit, newest_first)

    def errors(
        self, limit: int, code: str | None = None, host: str | None = None, counted: bool = True
    ) -> tuple[list[dict], dict[str, int]]:
        if "\x00" in (code or "") + (host or ""):  # no text holds one: none match
            return [], pg.error_rows(self.conn, self.job_id, 0, counted=counted)[1]
        return pg.error_rows(self.conn, self.job_id, limit, code, host, counted)

    def search(
        self, query: str, limit: int, host: str | None, since: float | None, until: float | None
    ) -> tuple[list[SearchHit], int]:
        hits = pg_search.search(self.conn, self.job_id, query, limit, host, since, until)
        return hits, pg_search.count_matches(self.conn, self.job_id, query, host, since, until)

    def url_report(self, url: str) -> dict:
        stored = pg.url_report(self.conn, self.job_id, url)
        report = stored or {
            "state": "unseen", "depth": None, "skip_reason": None, "kind": None,
            "parent_url": None, "status": None, "content_sha256": None, "error": None,
            "fetched_at": None, "fetches": [], "outbound_links": None, "inbound_links": 0,
            "urls_discovered": 0,
        }  # fmt: skip
        graph = pg_graph.inbound_report(self.conn, self.job_id, url)
        why = pg_provenance.provenance(self.conn, self.job_id, url, self.config.max_pages)
        tdm = pg_page_reservation(self.conn, self.job_id, url)
        return {"url": url, "host": host_key(url), **report, **graph, "robots": None,
                "provenance": why, **tdm}  # fmt: skip

    def hosts(self, offset: int, limit: int, sort: str = "host") -> tuple[list[dict], int]:
        names, total = pg.stored_hosts(self.conn, self.job_id, offset, limit)
        if sort == "queued":  # Redis's number: every host's, sorted here
            every = pg.all_hosts(self.conn, self.job_id)
            queued = self.frontier.host_queued(every)
            names = sorted(every, key=lambda host: (-queued[host], host))[offset : offset + limit]
        elif sort != "host":
            names = pg.sorted_hosts(self.conn, self.job_id, sort, offset, limit)
        return self._host_rows(names), total

    def _host_rows(self, names: list[str]) -> list[dict]:
        numbers = pg.host_numbers(self.conn, self.job_id, names)
        queued = self.frontier.host_queued(names)
        kept = self.frontier.host_politeness(names)
        robots = pg.robots_summaries(self.conn, self.job_id, names)
        rows = []
        for host in names:
            crawl_delay, backoff = kept[host]
            row = host_row(host, queued[host], numbers.get(host))
            row["interval_s"] = current_interval_s(self.config, crawl_delay, backoff)
            row["backoff_s"] = backoff or None
            status, error = robots.get(host, (None, None))
            # Crawl-delay: the one the workers apply (PostgreSQL keeps no robots.txt body).
            row["robots"] = None if host not in robots else {
                "status": status, "error": error, "crawl_delay": crawl_delay}  # fmt: skip
            rows.append(row)
        return with_reservations(rows, pg_host_reservations(self.conn, self.job_id, names))

    def host_report(self, host: str) -> dict | None:
        if "\x00" in host:
            return None  # PostgreSQL text holds no NUL: no such host
        numbers = pg.host_numbers(self.conn, self.job_id, [host]).get(host)
        queued = self.frontier.host_queued([host])[host]
        if numbers is None and not queued:
            return None
        report = host_row(host, queued, numbers)
        crawl_delay, backoff = self.frontier.host_politeness([host])[host]
        report["interval_s"] = current_interval_s(self.config, crawl_delay, backoff)
        report["politeness"] = dict.fromkeys(
            ("last_sent_at", "next_allowed_at", "crawl_delay_s", "backoff_s", "failures",
             "paused_until"))  # fmt: skip
        report["robots"] = pg.host_robots(self.conn, self.job_id, host)
        return report

    def activity(self, now: float) -> dict:
        found = pg.activity(self.conn, self.job_id, now)
        found["queue"]["pending"] = self.frontier.queued()
        return found

    def per_second(self, start: float, end: float) -> list[tuple]:
        return pg.per_second(self.conn, self.job_id, start, end)

    def metric_numbers(self, bounds: tuple[float, ...]) -> tuple[dict, list, float, int]:
        totals = pg.metric_numbers(self.conn, self.job_id)
        totals["frontier"] = self.frontier.queued()
        totals["active_hosts"] = self.frontier.active_hosts()
        buckets, total_s, count = pg.fetch_durations(self.conn, self.job_id, bounds)
        return totals, buckets, total_s, count


def _give_back(pool: ConnectionPool, conn: psycopg.Connection) -> None:
    """End the read transaction, then return the connection (a broken one is dropped)."""
    with contextlib.suppress(psycopg.Error):  # a broken one: the pool replaces it
        conn.rollback()
    pool.putconn(conn)
