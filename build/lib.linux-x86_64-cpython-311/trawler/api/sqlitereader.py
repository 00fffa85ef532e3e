"""``JobReader`` over one job's SQLite database (the embedded layout), read-only:
a crawl may be writing it. Each method is one existing read function of the store
(store/sqlite.py, store/search.py, store/sqlite_read.py); this class only binds
them to a connection and turns a failing database into ``StoreUnavailable``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from trawler.api.deps import NoCrawlData, StoreUnavailable
from trawler.export_hosts import host_reservations, with_reservations
from trawler.export_versions import has_versions, versioned_rows
from trawler.store import search, sqlite_graph, sqlite_hosts, sqlite_provenance, sqlite_read
from trawler.store.sqlite import NotTrawlerData, connect, has_table
from trawler.store.sqlite_export import EXPORT_COLUMNS, iter_pages
from trawler.store.tdm_read import page_reservation
from trawler.store.versions import versions_of


class SqliteJobReader:
    def __init__(self, conn: sqlite3.Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        job = sqlite_read.stored_job(conn)
        self.config = job.config if job is not None else None

    @classmethod
    def open(cls, path: Path, name: str) -> SqliteJobReader:
        try:
            conn = connect(path, readonly=True)
        except FileNotFoundError:
            raise NoCrawlData(f"job {name} has no crawl data yet") from None
        except (NotTrawlerData, sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(str(exc)) from None
        try:
            return cls(conn, name)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot read the data of job {name}: {exc}") from None

    def __enter__(self) -> SqliteJobReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        if isinstance(exc, sqlite3.Error):  # the database failed under us: the store's fault
            raise StoreUnavailable(f"cannot read the data of job {self.name}: {exc}") from exc

    def close(self) -> None:
        self.conn.close()

    @property
    def _robots_token(self) -> str:
        return self.config.robots_token if self.config is not None else ""

    def export_rows(
        self, include_noindex: bool, kinds: frozenset[str], versions: str = "latest"
    ) -> Iterator[dict]:
        rows = iter_pages(self.conn, include_noindex, kinds)
        return versioned_rows(self.conn, rows, versions) if has_versions(self.conn) else rows

    def export_columns(self) -> tuple[str, ...]:
        return (*EXPORT_COLUMNS, "version") if has_versions(self.conn) else EXPORT_COLUMNS

    def versions(self, url: str, text: bool) -> list[dict]:
        if not has_table(self.conn, "page_versions"):
            return []  # never revisited: no versions beyond its pages
        rows = list(versions_of(self.conn, url, latest_only=False))
        for row in rows if not text else ():
            row.pop("text")
        return rows

    def pages(
        self, wanted: sqlite_read.PageFilter, offset: int, limit: int, newest_first: bool = False
    ) -> tuple[list[dict], int]:
        return sqlite_read.page_rows(self.conn, wanted, offset, limit, newest_first)

    def errors(
        self, limit: int, code: str | None = None, host: str | None = None, counted: bool = True
    ) -> tuple[list[dict], dict[str, int]]:
        return sqlite_read.error_rows(self.conn, limit, code, host, counted)

    def search(
        self, query: str, limit: int, host: str | None, since: float | None, until: float | None
    ) -> tuple[list[search.SearchHit], int]:
        try:
            hits = search.search(self.conn, query, limit, host, since, until)
            return hits, search.count_matches(self.conn, query, host, since, until)
        except search.SearchIndexMissing:
            return [], 0  # a database from before search: nothing to find in it

    def url_report(self, url: str) -> dict:
        report = sqlite_read.url_report(self.conn, url, self._robots_token)
        report["provenance"] = sqlite_provenance.provenance(
            self.conn, url, report["host"], self.config.max_pages if self.config else None
        )
        report.update(page_reservation(self.conn, url))
        return {**report, **sqlite_graph.inbound_report(self.conn, url)}  # the link graph's

    def hosts(self, offset: int, limit: int, sort: str = "host") -> tuple[list[dict], int]:
        rows, total = sqlite_hosts.host_rows(self.conn, offset, limit, sort, self.config)
        return with_reservations(
            rows, host_reservations(self.conn, [r["host"] for r in rows])
        ), total

    def host_report(self, host: str) -> dict | None:
        if self.config is None:
            return None
        return sqlite_hosts.host_report(self.conn, host, self.config)

    def activity(self, now: float) -> dict:
        return sqlite_read.activity(self.conn, now)

    def per_second(self, start: float, end: float) -> list[tuple]:
        return sqlite_read.per_second(self.conn, start, end)

    def metric_numbers(self, bounds: tuple[float, ...]) -> tuple[dict, list, float, int]:
        buckets, total_s, count = sqlite_read.fetch_durations(self.conn, bounds)
        return sqlite_read.metric_numbers(self.conn), buckets, total_s, count
