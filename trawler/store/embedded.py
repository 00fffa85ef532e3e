"""The embedded backend: SQLite for frontier and metadata, WARC files for content.

``commit()`` is the crawl's commit point (docs/architecture.md): the WARC
records of a batch are written and fsynced first, then one SQLite
transaction stores the pages, the newly discovered URLs, the URLs done or
skipped, and the WARC files' committed sizes. A URL is acknowledged only
when that transaction returns. A kill before it loses nothing: the batch's
URLs are still queued in the database and are fetched again on resume;
WARC bytes written after the last committed size are cut off on restart.

Everything here is blocking and runs on one writer thread.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from trawler import __version__
from trawler.config import CrawlConfig
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.store import sqlite as db
from trawler.store.warc import WarcWriter, recover

WARC_DIR = "warc"


@dataclass(slots=True)
class CommitBatch:
    """What one group commit makes durable."""

    fetched: list[tuple[CrawlRequest, FetchResult, PageRecord]] = field(default_factory=list)
    skipped: list[tuple[CrawlRequest, str]] = field(default_factory=list)
    new_requests: list[CrawlRequest] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.fetched) + len(self.skipped) + len(self.new_requests) + len(self.counters)

    @property
    def acked(self) -> int:
        return len(self.fetched) + len(self.skipped)


class EmbeddedBackend:
    """Owns the data directory: database connection, frontier, WARC writer."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.conn: sqlite3.Connection = db.connect(data_dir)
        self.store = db.SqliteStore(self.conn)
        self.frontier: SqliteFrontier | None = None
        self.warc: WarcWriter | None = None

    def open_crawl(self, config: CrawlConfig) -> SqliteFrontier:
        """Repair WARC files left by a crash, load the frontier, open a WARC file."""
        warc_dir = self.data_dir / WARC_DIR
        warc_dir.mkdir(parents=True, exist_ok=True)
        recover(warc_dir, self.store.warc_positions())
        policy = PolitenessPolicy(config.delay_s, config.max_crawl_delay_s)
        self.frontier = SqliteFrontier(policy)
        self.frontier.load(self.conn)
        self.warc = WarcWriter(
            warc_dir, max_bytes=config.warc_max_bytes, software=f"Trawler/{__version__}"
        )
        return self.frontier

    def commit(self, batch: CommitBatch) -> None:
        assert self.warc is not None and self.frontier is not None
        pages = []
        for _request, result, page in batch.fetched:
            location = self.warc.write(result)
            if location is not None:
                page.warc_file, page.warc_offset = location.filename, location.offset
            pages.append(page)
        self.warc.flush(fsync=True)
        with self.conn:  # one transaction: the commit point
            self.store.insert_pages(pages)
            self.frontier.persist_new(self.conn, batch.new_requests)
            self.frontier.persist_done(
                self.conn, [request for request, _, _ in batch.fetched], batch.skipped
            )
            if batch.counters:
                self.store.add_counters(batch.counters)
            position = self.warc.position()
            if position is not None:
                self.store.set_warc_position(*position)

    def close(self) -> None:
        if self.warc is not None:
            self.warc.close()
        self.conn.close()
