"""The store contract: what the engine hands over at each commit, and the backend.

A backend pairs a frontier with a page store and makes one ``CommitBatch``
durable at a time. ``commit()`` is the crawl's commit point: when it returns,
the batch's pages, WARC records and discovered URLs are durable, the new URLs
are schedulable and the batch's leases are acknowledged. The order inside a
backend is free as long as a crash at any moment loses nothing: pages are
stored idempotently (a URL's page at most once), discovered URLs are added to
the seen set idempotently, and leases are acknowledged last.

A batch is made of ``UrlOutcome``s, one per URL the engine is done with: its
final state, its fetch attempt rows, its page and the URLs found on it travel
together, so no commit can hold one without the others. A value of one page
that cannot be stored (a WARC record that cannot be built, a value the
database rejects) costs that page only: it is stored as a bare ``store_error``
row and its URL is finished like any other. Failures of the store itself
(disk full, unwritable directory, lost connection) still fail the commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from trawler.config import CrawlConfig
from trawler.dedup import ContentDedup
from trawler.frontier.base import Frontier
from trawler.records import CrawlRequest, Edge, FetchResult, PageRecord, RobotsRecord
from trawler.store.warc import WarcWriter

if TYPE_CHECKING:  # recrawl_visit imports the store's modules
    from trawler.recrawl import RevisitWindow
    from trawler.recrawl_visit import RevisitOutcome
    from trawler.store.versions import RevisitState

log = logging.getLogger("trawler")

# What became of a URL. RETRY is an attempt only: the URL stays leased for another try.
DONE, DEAD, SKIPPED, RETRY = "done", "dead", "skipped", "retry"
STORE_ERROR = "store_error"  # the page's own data could not be stored; see log for why

# Failures of the machine, not of one page: they fail the whole commit.
ENVIRONMENT_ERRORS = (OSError, MemoryError)


@dataclass(slots=True)
class UrlOutcome:
    """One URL's result, committed whole: state, attempt rows, page, links found."""

    request: CrawlRequest
    state: str  # DONE, DEAD, SKIPPED or RETRY
    # Fetch attempts: (url, attempt, started_at, duration_s, status, error, decision).
    attempts: list[tuple] = field(default_factory=list)
    result: FetchResult | None = None  # what the WARC record is made of
    page: PageRecord | None = None
    discovered: list[CrawlRequest] = field(default_factory=list)  # new URLs found on the page
    reason: str | None = None  # why a URL was skipped
    edges: list[Edge] = field(default_factory=list)  # the page's links (graph.py), stored with it
    # Why URLs were queued or left out: provenance.Row tuples (the URL's own when skipped).
    provenance: list[tuple] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state != RETRY

    def store_failed(self, stage: str, exc: BaseException) -> None:
        """Keep a bare error row for the page, its WARC place if its record was written,
        no links followed; and say why in one log line."""
        request, old = self.request, self.page
        log.warning("cannot store %s (%s: %s); kept as %s", request.url, stage,
                    _one_line(exc), STORE_ERROR)  # fmt: skip
        self.page = PageRecord(
            url=request.url, final_url=request.url, status=None, content_type=None,
            content_length=0, depth=request.depth, parent_url=request.parent_url, title=None,
            description=None, keywords=None, text=None, links_count=0, content_sha256=None,
            fetched_at=old.fetched_at if old else 0.0, fetch_duration_s=0.0, error=STORE_ERROR,
            warc_file=old.warc_file if old else None, warc_offset=old.warc_offset if old else None,
            attempts=request.attempts + 1, host=request.host, kind=request.kind,
        )  # fmt: skip
        self.discovered, self.edges = [], []


@dataclass(slots=True)
class CommitBatch:
    """What one group commit makes durable."""

    outcomes: list[UrlOutcome] = field(default_factory=list)
    # URLs found outside any URL's outcome: seeds, sitemaps named by robots.txt.
    new_requests: list[CrawlRequest] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    # robots.txt downloads: archived like pages (WARC request + response), a row each.
    robots: list[tuple[FetchResult, RobotsRecord]] = field(default_factory=list)
    # Revisits of stored pages (recrawl_visit.py): their visits, versions and state.
    revisits: list[RevisitOutcome] = field(default_factory=list)
    pages: int = 0  # outcomes with a page
    items: int = 0  # rows this batch will write, to commit early when it grows
    # What its pages hold in memory (their bodies and ~8 KB each, throttle.py's
    # estimate), as told by ``add``: the batch growing while a commit runs is
    # bounded by it too (commits.py).
    size_bytes: int = 0

    def add(self, outcome: UrlOutcome, size: int = 0) -> None:
        self.outcomes.append(outcome)
        self.pages += outcome.page is not None
        self.items += 1 + len(outcome.attempts) + len(outcome.discovered)
        self.size_bytes += size

    def add_revisit(self, outcome: RevisitOutcome) -> None:
        self.revisits.append(outcome)
        self.items += 2 + len(outcome.discovered)

    def add_robots(self, result: FetchResult, record: RobotsRecord) -> None:
        self.robots.append((result, record))
        self.items += 1

    @property
    def robots_records(self) -> list[RobotsRecord]:
        return [record for _result, record in self.robots]

    def add_requests(self, requests: list[CrawlRequest]) -> None:
        self.new_requests += requests
        self.items += len(requests)

    def __len__(self) -> int:
        return self.items + len(self.counters)

    def chunks(self, max_items: int) -> list[CommitBatch]:
        """The batch as batches of at most ``max_items`` rows (an outcome larger than
        that alone), to be committed one after another, in order: each URL's outcome
        whole in one. The first carries everything but the outcomes: the robots.txt
        downloads (archived before any page of their origin), the URLs found outside
        outcomes, the counters."""
        if self.items <= max_items:
            return [self]
        rows = [1 + len(outcome.attempts) + len(outcome.discovered) for outcome in self.outcomes]
        chunks = [replace(self, outcomes=[], pages=0, items=self.items - sum(rows))]
        for outcome, outcome_rows in zip(self.outcomes, rows, strict=True):
            if chunks[-1].items and chunks[-1].items + outcome_rows > max_items:
                chunks.append(CommitBatch())
            chunks[-1].add(outcome)
        return chunks

    @property
    def acked(self) -> int:
        return sum(outcome.finished for outcome in self.outcomes) + len(self.revisits)

    def all_new_requests(self) -> list[CrawlRequest]:
        found = [request for outcome in self.outcomes for request in outcome.discovered]
        found += [request for revisit in self.revisits for request in revisit.discovered]
        return self.new_requests + found

    def outcome_counters(self) -> dict[str, int]:
        """The batch's counters plus ``skipped.<reason>`` and ``dead_letter`` of its URLs."""
        counters = dict(self.counters)
        for outcome in self.outcomes:
            if outcome.state == SKIPPED:
                name = f"skipped.{outcome.reason}"
            elif outcome.state == DEAD:
                name = "dead_letter"
            else:
                continue
            counters[name] = counters.get(name, 0) + 1
        return counters


def archive_batch(batch: CommitBatch, warc: WarcWriter, dedup: ContentDedup | None) -> None:
    """Step one of every backend's commit: mark content duplicates (in fetch order;
    None: the store marks them, as the distributed one does: store/pg_dedup.py),
    write the WARC records and fsync them; sets each page's WARC place.

    A record that cannot be built costs its page (``UrlOutcome.store_failed``):
    ``WarcWriter.write`` builds both records before writing a byte, so a page
    without a WARC place has no bytes in the file either. robots.txt downloads of the
    batch go first: each was fetched before any page of its origin."""
    for fetched, record in batch.robots:
        _archive_robots(warc, fetched, record)
    for outcome in batch.outcomes:
        page, result = outcome.page, outcome.result
        if page is None or result is None:
            continue
        try:
            location = warc.write(result)
            if dedup is not None:  # after: a page that failed is nobody's original
                dedup.check(page)
        except ENVIRONMENT_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - this page's data, not the disk
            outcome.store_failed("warc", exc)
            continue
        if location is not None:
            page.warc_file, page.warc_offset = location.filename, location.offset
    warc.flush(fsync=True)


def _archive_robots(warc: WarcWriter, result: FetchResult, record: RobotsRecord) -> None:
    """Write one robots.txt download; one that cannot be written keeps its row, marked."""
    try:
        location = warc.write(result)
    except ENVIRONMENT_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - this response's data, not the disk
        log.warning("cannot archive %s (warc: %s); kept as %s", record.url, _one_line(exc),
                    STORE_ERROR)  # fmt: skip
        record.error = STORE_ERROR
        return
    if location is not None:
        record.warc_file, record.warc_offset = location.filename, location.offset


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


class Backend(Protocol):
    async def open(self, config: CrawlConfig) -> Frontier:
        """Load or resume the job's crawl state; returns its frontier."""

    async def commit(self, batch: CommitBatch) -> None:
        """Make the batch durable, schedule its new URLs, acknowledge its leases."""

    async def host_url_counts(self) -> dict[str, int] | None:
        """URLs admitted so far per host (for the per-host budget); None when the
        frontier keeps the budget itself (then the link filter does not refuse)."""

    async def scope_hosts(self) -> list[str]:
        """The hosts of the job's seeds (host keys): its scope, kept with the job."""

    async def add_scope_hosts(self, hosts: list[str]) -> None:
        """Keep these seed hosts with the job, before their seeds enter the frontier."""

    async def seeds_added(self) -> None:
        """The seeds given to this run are all in the frontier."""

    async def close(self) -> None: ...


class RevisitBackend(Protocol):
    """A backend that keeps page versions (issue 15; the embedded one so far). Its
    ``commit()`` also makes a batch's ``revisits`` durable: their WARC records with
    the batch's, their rows in the same transaction, and then tells the frontier
    (``Revisitable.revisits_done``) that those pages may be polled again."""

    async def open_revisits(self, window: RevisitWindow) -> None:
        """Revisits are wanted this run, in ``window``: seed the state of stored pages."""

    async def due_revisits(self, now: float, limit: int) -> list[tuple[RevisitState, int]]:
        """(state, page depth) of pages due by ``now`` (wall clock), soonest first;
        pages stored since the last call are seeded first."""

    async def pass_revisits(self, limit: int) -> list[tuple[RevisitState, int]]:
        """One pass over every page, due or not: the next ``limit`` (empty: done)."""
