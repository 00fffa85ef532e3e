"""The durable side of revisits: seeding revisit state from the crawl's pages and
committing one visit (WARC records first and fsynced, then one SQLite transaction
with the WARC file's committed size, as the crawl's commit point does, so a kill
at any moment leaves no row pointing past the durable end of a WARC file).

Blocking: the runner (recrawl_run.py) calls it on its writer thread.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from trawler import __version__
from trawler.outcome import robots_record
from trawler.records import FetchResult
from trawler.recrawl import Interval, RevisitWindow, estimate_rate, lastmod_epoch, prior_rate
from trawler.recrawl_visit import CHANGED, FAILED, NOT_MODIFIED, Judgement, validators
from trawler.store import sqlite as db
from trawler.store import versions as v
from trawler.store.warc import WarcLocation, recover
from trawler.store.warc_revisit import (
    PROFILE_IDENTICAL,
    PROFILE_NOT_MODIFIED,
    RefersTo,
    RevisitWarcWriter,
)

WARC_DIR = "warc"  # as the embedded backend's (store/embedded.py)
log = logging.getLogger("trawler")


class RecrawlStore:
    """One job directory's database and a WARC writer for its revisits."""

    def __init__(self, job_dir: Path, warc_max_bytes: int) -> None:
        self.conn = db.connect(job_dir)
        self.store = db.SqliteStore(self.conn)
        warc_dir = job_dir / WARC_DIR
        warc_dir.mkdir(parents=True, exist_ok=True)
        recover(warc_dir, self.store.warc_positions())
        self.warc = RevisitWarcWriter(
            warc_dir, prefix="trawler-revisit", max_bytes=warc_max_bytes,
            software=f"Trawler/{__version__}",
        )  # fmt: skip
        self.job_dir = job_dir

    def close(self) -> None:
        try:
            self.warc.close()
        finally:
            self.conn.close()

    def host_delays(self) -> dict[str, float]:
        """robots.txt Crawl-delay per host, as the crawl kept it (hosts table)."""
        rows = self.conn.execute("SELECT host, crawl_delay_s FROM hosts")
        return {host: delay for host, delay in rows if delay}

    def seed(self, window: RevisitWindow) -> int:
        """Revisit state for each stored 2xx page that has none yet: version 1 is the
        crawl's page, validators come from its WARC record, the first estimate from
        its sitemap <lastmod>. Returns the pages seeded."""
        rows = v.unseeded_pages(self.conn)
        with self.conn:
            for row in rows:
                v.seed_version(self.conn, row, self._first_state(row, window))
        return len(rows)

    def _first_state(self, row: tuple, window: RevisitWindow) -> v.RevisitState:
        url, host, final_url, fetched_at, *_rest = row
        sha, simhash, warc_file, warc_offset, lastmod = row[7], row[8], row[11], row[12], row[13]
        etag, last_modified = self._archived_validators(warc_file, warc_offset)
        changed_at = lastmod_epoch(lastmod)
        age = fetched_at - changed_at if changed_at is not None else None
        rate = prior_rate(None, age, window)
        due = fetched_at + window.interval_s(rate)
        return v.RevisitState(url, host or "", final_url or url, etag, last_modified, sha,
                              simhash, 1, fetched_at, fetched_at, due, rate)  # fmt: skip

    def _archived_validators(
        self, warc_file: str | None, offset: int | None
    ) -> tuple[str | None, str | None]:
        """ETag and Last-Modified of the response the crawl archived (none if unreadable)."""
        if warc_file is None or offset is None:
            return None, None
        from warcio.archiveiterator import ArchiveIterator

        directory = self.job_dir / WARC_DIR
        path = directory / warc_file
        if not path.exists():
            path = directory / (warc_file + ".open")
        try:
            with path.open("rb") as f:
                f.seek(offset)
                record = next(iter(ArchiveIterator(f)))
                headers = record.http_headers.headers if record.http_headers else []
        except (OSError, StopIteration, ValueError) as exc:
            log.warning("cannot read %s at %s for its validators: %s", warc_file, offset, exc)
            return None, None
        return validators(list(headers))

    def defer(self, url: str, next_visit_at: float) -> None:
        """A page not fetched now (robots.txt): asked again at ``next_visit_at``."""
        with self.conn:
            self.conn.execute(
                "UPDATE revisit_state SET next_visit_at = ? WHERE url = ?", (next_visit_at, url)
            )

    def archive_robots(self, result: FetchResult, host: str) -> None:
        """A robots.txt download: a WARC record and a row, as the crawl keeps them."""
        record = robots_record(result, host)
        location = self.warc.write(result)
        if location is not None:
            record.warc_file, record.warc_offset = location.filename, location.offset
        self.warc.flush(fsync=True)
        with self.conn:
            self.store.insert_robots([record])
            if (position := self.warc.position()) is not None:
                self.store.set_warc_position(*position)

    def commit_visit(
        self, state: v.RevisitState, result: FetchResult, judgement: Judgement,
        window: RevisitWindow,
    ) -> v.RevisitState:  # fmt: skip
        """Archive and record one visit; returns the page's new revisit state."""
        location = self._archive(state, result, judgement)
        self.warc.flush(fsync=True)
        visited_at = result.started_at
        with self.conn:
            v.add_visit(self.conn, v.VisitRow(
                state.url, visited_at, result.status, judgement.verdict, judgement.distance,
                len(result.raw_body), *_place(location),
            ))  # fmt: skip
            new_state = self._next_state(state, result, judgement, window)
            if judgement.verdict == CHANGED:
                v.add_version(self.conn, _version_values(new_state, result, judgement, location))
            v.put_state(self.conn, new_state)
            if (position := self.warc.position()) is not None:
                self.store.set_warc_position(*position)
        return new_state

    def _archive(
        self, state: v.RevisitState, result: FetchResult, judgement: Judgement
    ) -> WarcLocation | None:
        if judgement.verdict in (CHANGED, FAILED):
            return self.warc.write(result)  # a new version, or an error answer as it came
        profile = PROFILE_NOT_MODIFIED if judgement.verdict == NOT_MODIFIED else PROFILE_IDENTICAL
        refers = RefersTo(state.final_url, state.version_at)
        return self.warc.write_revisit(result, profile, refers)

    def _next_state(
        self, state: v.RevisitState, result: FetchResult, judgement: Judgement,
        window: RevisitWindow,
    ) -> v.RevisitState:  # fmt: skip
        """The state after this visit (recorded already): rate from the whole history."""
        rate = _estimated_rate(self.conn, state)
        new = v.RevisitState(*(getattr(state, name) for name in v.STATE_COLUMNS))
        new.last_visit_at, new.rate_per_s = result.started_at, rate
        new.next_visit_at = result.started_at + window.interval_s(rate)
        if judgement.verdict == FAILED:
            return new
        new.etag, new.last_modified = judgement.etag, judgement.last_modified
        if judgement.verdict == CHANGED:
            new.version, new.version_at = state.version + 1, result.started_at
            new.final_url, new.content_sha256 = result.final_url, judgement.content_sha256
            new.simhash = judgement.simhash
        return new


def _estimated_rate(conn: sqlite3.Connection, state: v.RevisitState) -> float:
    """Intervals between successful visits, the crawl's fetch being the first visit;
    a failed visit tells nothing, so its interval runs on to the next good one."""
    since = _first_visit_at(conn, state.url)
    intervals = []
    for visited_at, verdict in v.visit_history(conn, state.url):
        if verdict == FAILED:
            continue
        intervals.append(Interval(visited_at - since, verdict == CHANGED))
        since = visited_at
    if not intervals:
        return state.rate_per_s
    return estimate_rate(intervals)


def _first_visit_at(conn: sqlite3.Connection, url: str) -> float:
    row = conn.execute(
        "SELECT fetched_at FROM page_versions WHERE url = ? AND version = 1", (url,)
    ).fetchone()
    return float(row[0]) if row else 0.0


def _place(location: WarcLocation | None) -> tuple[str | None, int | None]:
    return (location.filename, location.offset) if location else (None, None)


def _version_values(
    state: v.RevisitState, result: FetchResult, judgement: Judgement,
    location: WarcLocation | None,
) -> dict[str, object]:  # fmt: skip
    warc_file, warc_offset = _place(location)
    return {
        "url": state.url, "version": state.version, "fetched_at": result.started_at,
        "final_url": result.final_url, "status": result.status,
        "content_type": result.content_type, "content_length": len(result.body),
        "content_sha256": judgement.content_sha256, "simhash": judgement.simhash,
        "distance": judgement.distance, "title": judgement.title, "text": judgement.text,
        "etag": judgement.etag, "last_modified": judgement.last_modified,
        "warc_file": warc_file, "warc_offset": warc_offset,
    }  # fmt: skip
