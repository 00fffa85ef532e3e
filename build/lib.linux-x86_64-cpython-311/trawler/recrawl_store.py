"""The durable side of revisits, on the embedded backend's writer thread: revisit
state seeded from the crawl's pages, the due rows read for the frontier's lanes
(recrawl_lanes.py), and the revisits of a batch committed with the crawl's commit
(store/embedded.py): their WARC records written and fsynced with the batch's, their
rows (visits, new versions, revisit state) in the same transaction as its pages, so a
kill at any moment leaves no row pointing past the durable end of a WARC file and
no visit recorded twice.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from trawler import __version__, tdmrefresh
from trawler.records import FetchResult
from trawler.recrawl import Interval, RevisitWindow, estimate_rate, lastmod_epoch, prior_rate
from trawler.recrawl_visit import (
    CHANGED,
    GONE,
    NO_EVIDENCE,
    NOT_MODIFIED,
    UNCHANGED,
    Judgement,
    RevisitOutcome,
    validators,
)
from trawler.revisit_policy import RevisitSchedule, plan_schedule
from trawler.store import sqlite as db
from trawler.store import versions as v
from trawler.store.warc import WarcLocation
from trawler.store.warc_revisit import (
    PROFILE_IDENTICAL,
    PROFILE_NOT_MODIFIED,
    RefersTo,
    RevisitWarcWriter,
)

WARC_DIR = "warc"  # as the embedded backend's (store/embedded.py)
# The optimal schedule's price is solved again from every page's rate at most this
# often, and at most a tenth of the time (reading a million rates takes ~0.5 s).
REPRICE_MIN_S = 1.0
log = logging.getLogger("trawler")


class RecrawlStore:
    """A job's revisit rows, on the backend's connection, and a WARC writer of its own
    (``trawler-revisit-*`` files) for the revisits' records."""

    def __init__(self, conn: sqlite3.Connection, job_dir: Path, window: RevisitWindow,
                 warc_max_bytes: int) -> None:  # fmt: skip
        self.conn = conn
        self.window = window
        self.job_dir = job_dir
        (job_dir / WARC_DIR).mkdir(parents=True, exist_ok=True)
        self.warc = RevisitWarcWriter(
            job_dir / WARC_DIR, prefix="trawler-revisit", max_bytes=warc_max_bytes,
            software=f"Trawler/{__version__}",
        )  # fmt: skip
        self._seeded_upto = 0  # pages.id up to which revisit state was seeded
        self._pass_after = 0  # rowid of revisit_state a one-pass run has read up to
        self.schedule = RevisitSchedule(window.bounds, window.policy)
        self._reprice_after = 0.0  # monotonic time before which the price stands
        self._rates_moved = True  # a rate changed since the schedule was priced

    def close(self) -> None:
        self.warc.close()

    def seed(self) -> int:
        """Revisit state for each stored 2xx page that has none yet: version 1 is the
        crawl's page, validators come from its WARC record, the first estimate from
        its sitemap <changefreq> or <lastmod> (recrawl.prior_rate). Only pages stored
        since the last call are read after the first. Returns the pages seeded."""
        rows, self._seeded_upto = v.unseeded_pages(self.conn, self._seeded_upto)
        if rows:
            with self.conn:
                for row in rows:
                    v.seed_version(self.conn, row, self._first_state(row))
            self._rates_moved = True
            self.reprice(force=False)
        return len(rows)

    def reprice(self, force: bool = False) -> None:
        """The schedule priced again over every page's rate (revisit_policy.py): the
        optimal interval of a page depends on the others' rates through the budget.
        Not forced: only if a rate moved and the last solve is not too recent."""
        now = time.monotonic()
        if not force and (not self._rates_moved or now < self._reprice_after):
            return
        rates = [rate for (rate,) in self.conn.execute("SELECT rate_per_s FROM revisit_state")]
        self.schedule = plan_schedule(rates, self.window.bounds, self.window.policy)
        took = time.monotonic() - now
        self._reprice_after, self._rates_moved = now + max(REPRICE_MIN_S, 10 * took), False

    def due(self, now: float, limit: int) -> list[tuple[v.RevisitState, int]]:
        """(state, page depth) of pages due by ``now``, soonest first, at most ``limit``."""
        self.seed()
        return v.due_states(self.conn, now, limit)

    def next_of_pass(self, limit: int) -> list[tuple[v.RevisitState, int]]:
        """One pass over every page (``trawler recrawl``): the next ``limit`` rows."""
        if self._pass_after == 0:
            self.seed()
        rows, self._pass_after = v.states_after(self.conn, self._pass_after, limit)
        return rows

    def _first_state(self, row: tuple) -> v.RevisitState:
        url, host, final_url, fetched_at, *_rest = row
        sha, simhash, warc_file, warc_offset = row[7], row[8], row[11], row[12]
        lastmod, changefreq = row[13], row[14]
        etag, last_modified = self._archived_validators(warc_file, warc_offset)
        changed_at = lastmod_epoch(lastmod)
        age = fetched_at - changed_at if changed_at is not None else None
        rate = prior_rate(changefreq, age, self.window)
        due = fetched_at + self.schedule.interval_s(rate)
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

    def archive(self, outcomes: list[RevisitOutcome]) -> None:
        """Step one of the commit: each visit's WARC records, then one fsync."""
        for outcome in outcomes:
            if outcome.judgement is not None and outcome.result is not None:
                location = self._archive(outcome.state, outcome.result, outcome.judgement)
                outcome.warc_place = _place(location)
        self.warc.flush(fsync=True)

    def record(self, outcomes: list[RevisitOutcome], store: db.SqliteStore) -> None:
        """Step two, inside the commit's transaction: each revisit's rows, whole or not
        at all (a savepoint each: a row the database rejects costs that visit only,
        and its page stays due)."""
        self.reprice(force=False)
        for outcome in outcomes:
            self.conn.execute("SAVEPOINT revisit")
            try:
                self._record(outcome)
            except sqlite3.IntegrityError as exc:
                self.conn.execute("ROLLBACK TO revisit")
                log.warning("cannot record the revisit of %s: %s", outcome.state.url, exc)
            self.conn.execute("RELEASE revisit")
        if (position := self.warc.position()) is not None:
            store.set_warc_position(*position)

    def _record(self, outcome: RevisitOutcome) -> None:
        state, result, judgement = outcome.state, outcome.result, outcome.judgement
        if judgement is None or result is None:  # not fetched now: asked again later
            self.conn.execute("UPDATE revisit_state SET next_visit_at = ? WHERE url = ?",
                              (outcome.defer_to, state.url))  # fmt: skip
            return
        place = outcome.warc_place
        v.add_visit(self.conn, v.VisitRow(
            state.url, result.started_at, result.status, judgement.verdict, judgement.distance,
            len(result.raw_body), *place,
        ))  # fmt: skip
        new_state = self._next_state(state, result, judgement)
        self._rates_moved = self._rates_moved or new_state.rate_per_s != state.rate_per_s
        if judgement.verdict == CHANGED or new_state.version != state.version:
            v.add_version(self.conn, _version_values(new_state, result, judgement, place))
        v.put_state(self.conn, new_state)
        tdmrefresh.store(self.conn, outcome)  # its reuse reservation as it is now

    def _archive(
        self, state: v.RevisitState, result: FetchResult, judgement: Judgement
    ) -> WarcLocation | None:
        return archive_visit(self.warc, state, result, judgement)

    def _next_state(
        self, state: v.RevisitState, result: FetchResult, judgement: Judgement
    ) -> v.RevisitState:
        rate = _estimated_rate(self.conn, state)
        return next_state(state, result, judgement, self.schedule, rate)


def archive_visit(
    warc: RevisitWarcWriter, state: v.RevisitState, result: FetchResult, judgement: Judgement
) -> WarcLocation | None:
    """A visit's WARC records: a revisit record when nothing changed, else the answer."""
    if judgement.verdict not in (NOT_MODIFIED, UNCHANGED):
        return warc.write(result)  # a new version, or the answer as it came
    profile = PROFILE_NOT_MODIFIED if judgement.verdict == NOT_MODIFIED else PROFILE_IDENTICAL
    refers = RefersTo(state.final_url, state.version_at)
    return warc.write_revisit(result, profile, refers)


def next_state(
    state: v.RevisitState, result: FetchResult, judgement: Judgement,
    window: RevisitWindow | RevisitSchedule, rate: float,
) -> v.RevisitState:  # fmt: skip
    """The state after this visit (recorded already), ``rate`` estimated from the whole
    history (both backends: recrawl_store.py, store/pg_versions.py); ``window``: the
    interval rule (the embedded backend's priced schedule, or a window's proportional
    intervals).
    A gone page (404, 410) gets a version of its own, marked gone, once; it is asked
    again at --revisit-max: a page may come back (a 404 is often a slip), and one
    request per host per --revisit-max is what finding that costs."""
    new = v.RevisitState(*(getattr(state, name) for name in v.STATE_COLUMNS))
    new.last_visit_at, new.rate_per_s = result.started_at, rate
    new.next_visit_at = result.started_at + window.interval_s(rate)
    verdict = judgement.verdict
    if verdict == GONE:
        new.next_visit_at = result.started_at + window.max_s
        if state.content_sha256 is not None:  # gone now: the tombstone version
            new.version, new.version_at = state.version + 1, result.started_at
            new.content_sha256 = new.simhash = new.etag = new.last_modified = None
        return new
    if verdict in NO_EVIDENCE:  # failed, redirected: validators and version stay
        if result.retry_after_s is not None:  # RFC 9110 §10.2.3: not before then
            new.next_visit_at = max(new.next_visit_at, result.started_at + result.retry_after_s)
        return new
    new.etag, new.last_modified = judgement.etag, judgement.last_modified
    if verdict == CHANGED:
        new.version, new.version_at = state.version + 1, result.started_at
        new.final_url, new.content_sha256 = result.final_url, judgement.content_sha256
        new.simhash = judgement.simhash
    return new


def _estimated_rate(conn: sqlite3.Connection, state: v.RevisitState) -> float:
    history = v.visit_history(conn, state.url)
    return rate_from_history(state, _first_visit_at(conn, state.url), history)


def rate_from_history(
    state: v.RevisitState, since: float, history: list[tuple[float, str]]
) -> float:
    """Intervals between successful visits, the crawl's fetch (at ``since``) being the
    first visit; a failed (gone, redirected) visit tells nothing, so its interval runs
    on to the next good one."""
    intervals = []
    for visited_at, verdict in history:
        if verdict in NO_EVIDENCE:
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
    place: tuple[str | None, int | None],
) -> dict[str, object]:  # fmt: skip
    """The row of the page's new version (``state``: after the visit); a gone page's
    has its status and no content."""
    gone = judgement.verdict == GONE
    return {
        "url": state.url, "version": state.version, "fetched_at": result.started_at,
        "final_url": result.final_url, "status": result.status,
        "content_type": None if gone else result.content_type,
        "content_length": 0 if gone else len(result.body),
        "content_sha256": judgement.content_sha256, "simhash": judgement.simhash,
        "distance": judgement.distance, "title": judgement.title, "text": judgement.text,
        "etag": judgement.etag, "last_modified": judgement.last_modified,
        "warc_file": place[0], "warc_offset": place[1],
    }  # fmt: skip
