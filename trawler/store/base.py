"""The store contract: what the engine hands over at each commit, and the backend.

A backend pairs a frontier with a page store and makes one ``CommitBatch``
durable at a time. ``commit()`` is the crawl's commit point: when it returns,
the batch's pages, WARC records and discovered URLs are durable, the new URLs
are schedulable and the batch's leases are acknowledged. The order inside a
backend is free as long as a crash at any moment loses nothing: pages are
stored idempotently (a URL's page at most once), discovered URLs are added to
the seen set idempotently, and leases are acknowledged last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from trawler.config import CrawlConfig
from trawler.dedup import ContentDedup
from trawler.frontier.base import Frontier
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.store.warc import WarcWriter


@dataclass(slots=True)
class CommitBatch:
    """What one group commit makes durable."""

    fetched: list[tuple[CrawlRequest, FetchResult, PageRecord]] = field(default_factory=list)
    dead: set[int] = field(default_factory=set)  # fingerprints of fetched URLs dead-lettered
    # Every fetch attempt: (url, attempt, started_at, duration_s, status, error, decision).
    attempts: list[tuple] = field(default_factory=list)
    skipped: list[tuple[CrawlRequest, str]] = field(default_factory=list)
    new_requests: list[CrawlRequest] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return (
            len(self.fetched) + len(self.skipped) + len(self.new_requests) + len(self.attempts)
            + len(self.counters)
        )  # fmt: skip

    @property
    def acked(self) -> int:
        return len(self.fetched) + len(self.skipped)


def archive_batch(batch: CommitBatch, warc: WarcWriter, dedup: ContentDedup) -> list[PageRecord]:
    """Step one of every backend's commit: mark content duplicates (in fetch order),
    write the WARC records and fsync them; returns the page rows, WARC places set."""
    pages = []
    for _request, result, page in batch.fetched:
        dedup.check(page)
        location = warc.write(result)
        if location is not None:
            page.warc_file, page.warc_offset = location.filename, location.offset
        pages.append(page)
    warc.flush(fsync=True)
    return pages


class Backend(Protocol):
    async def open(self, config: CrawlConfig) -> Frontier:
        """Load or resume the job's crawl state; returns its frontier."""

    async def commit(self, batch: CommitBatch) -> None:
        """Make the batch durable, schedule its new URLs, acknowledge its leases."""

    async def host_url_counts(self) -> dict[str, int]:
        """URLs admitted so far per host (for the per-host budget)."""

    async def close(self) -> None: ...
