"""Revisits of a continuous job on the distributed backend (issue 15): what one worker
adds to the distributed commit, and the feed of due pages into Redis.

The commit keeps the distributed order (store/distributed.py), a revisit's rows
beside the batch's pages:

1. the revisits' WARC records (``trawler-revisit-<worker>-*`` files of the worker's
   --warc-dir) are written and fsynced with the batch's;
2. in the batch's one PostgreSQL transaction: the revisit state and version 1 of
   each page just stored, and each visit with its new version and state (pg_versions.py);
3. then Redis: the URLs found, then the revisits' leases and lanes ended
   (frontier/redis_revisits.py ``done``).

Feeding (``feed``): every ``POLL_S`` each worker asks for the feeder's turn; the one
that holds it takes a poll number, claims due pages in PostgreSQL (``FOR UPDATE SKIP
LOCKED``, a claim for ``claim_s``), and queues them in the hosts' revisit lanes in
Redis. A claim only spares the next polls re-reading pages already queued: that a
page is visited once per due time is Redis's to keep (``rpending``, ``racked``). A
feeder killed between its claim and Redis loses nothing: the claim expires and the
pages, still due, are claimed again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import psycopg

from trawler import __version__, tdmrefresh
from trawler.outage import guarded
from trawler.recrawl import RevisitWindow, lastmod_epoch, prior_rate
from trawler.recrawl_lanes import revisit_request
from trawler.recrawl_store import REPRICE_MIN_S, _place, archive_visit
from trawler.recrawl_visit import RevisitOutcome, validators
from trawler.revisit_policy import PROPORTIONAL, RevisitSchedule, priced_schedule
from trawler.store import pg_passes
from trawler.store import pg_versions as pv
from trawler.store.base import UrlOutcome
from trawler.store.postgres import ROW_REJECTED
from trawler.store.warc_revisit import RevisitWarcWriter

if TYPE_CHECKING:
    from trawler.frontier.redis import RedisFrontier
    from trawler.store.postgres import PostgresStore

T = TypeVar("T")
log = logging.getLogger("trawler")

POLL_S = 0.25  # as recrawl_flow.POLL_S: how often due pages are looked for
MAX_PENDING = 10_000  # revisits in lanes or leased at once, over the job's workers
FEED_TURN_S = 5.0  # the feeder's turn, renewed each poll; another worker's after


class DistributedRevisits:
    def __init__(self, store: PostgresStore, job_id: str, window: RevisitWindow,
                 warc: RevisitWarcWriter, claim_s: float,
                 pass_due_at: float | None = None) -> None:  # fmt: skip
        """``pass_due_at``: an on-demand pass (store/pg_passes.py): only pages due by
        then are fed, and the feed ends once none is left."""
        self.store = store
        self.job_id = job_id
        self.window = window
        self.warc = warc
        self.claim_s = claim_s
        self.pass_due_at = pass_due_at
        # The job's --revisit-policy: intervals proportional until the first pricing
        # (as the embedded RecrawlStore), then priced over every page's rate again
        # at most every REPRICE_MIN_S, each worker for itself (same rows, same price).
        self.schedule = RevisitSchedule(window.bounds, window.policy)
        self._reprice_after = 0.0

    @classmethod
    def open(
        cls,
        store: PostgresStore,
        job_id: str,
        window: RevisitWindow,
        warc_dir: Path,
        worker_id: str,
        warc_max_bytes: int,
        claim_s: float,
        pass_due_at: float | None = None,
    ) -> DistributedRevisits:
        """``claim_s``: how long a claimed page waits before it may be claimed again."""
        warc = RevisitWarcWriter(
            warc_dir, prefix=f"trawler-revisit-{worker_id}", max_bytes=warc_max_bytes,
            software=f"Trawler/{__version__}",
        )  # fmt: skip
        return cls(store, job_id, window, warc, claim_s, pass_due_at)

    # -- the commit --------------------------------------------------------------------
    def archive(self, revisits: Sequence[RevisitOutcome]) -> None:
        """Step one (the backend's writer thread): each visit's records, one fsync."""
        for outcome in revisits:
            if outcome.judgement is not None and outcome.result is not None:
                location = archive_visit(self.warc, outcome.state, outcome.result,
                                         outcome.judgement)  # fmt: skip
                outcome.warc_place = _place(location)
        self.warc.flush(fsync=True)

    def rows_of(
        self, outcomes: Sequence[UrlOutcome], revisits: Sequence[RevisitOutcome]
    ) -> Callable[[psycopg.AsyncCursor], Awaitable[None]]:
        """Step two: what the batch's PostgreSQL transaction also writes."""
        seeds = [row for o in outcomes if (row := self._seed_row(o)) is not None]

        async def write(cur: psycopg.AsyncCursor) -> None:
            await pv.seed(cur, self.job_id, seeds)
            for outcome in revisits:
                await self._record(cur, outcome)

        return write

    async def _record(self, cur: psycopg.AsyncCursor, outcome: RevisitOutcome) -> None:
        """A visit whole or not at all (a savepoint): a row the database rejects
        costs that visit only. Its page is put off by its interval, as if visited: left
        due, it would be fed, fetched and refused again as soon as its claim ended."""
        try:
            async with cur.connection.transaction():
                if await pv.record(cur, self.job_id, outcome, self.schedule):
                    await tdmrefresh.astore(cur, self.job_id, outcome)  # as it is now
        except ROW_REJECTED as exc:
            state, result = outcome.state, outcome.result
            visited_at = result.started_at if result is not None else time.time()
            next_at = visited_at + self.schedule.interval_s(state.rate_per_s)
            if await pv.put_off(cur, self.job_id, state, next_at):  # once per due time
                log.warning("cannot record the revisit of %s (next visit in %.0f s): %s",
                            state.url, next_at - visited_at, exc)  # fmt: skip

    def _seed_row(self, outcome: UrlOutcome) -> pv.SeedRow | None:
        """A page stored now gets its revisit state: the crawl's validators, the first
        estimate from its sitemap <changefreq> or <lastmod> (as recrawl_store.py's
        ``_first_state``)."""
        page, result = outcome.page, outcome.result
        if page is None or result is None or not pv.revisitable(page) or page.fetched_at is None:
            return None
        etag, last_modified = validators(result.headers)
        changed_at = lastmod_epoch(page.sitemap_lastmod)
        age = page.fetched_at - changed_at if changed_at is not None else None
        rate = prior_rate(page.sitemap_changefreq, age, self.window)
        due = page.fetched_at + self.schedule.interval_s(rate)
        return pv.SeedRow(page.url, etag, last_modified, due, rate)

    # -- feeding -----------------------------------------------------------------------
    async def feed(self, frontier: RedisFrontier) -> None:
        """Keep the hosts' revisit lanes filled with due pages, until cancelled; a
        pass's until none of its pages is left (every worker asks for itself)."""
        while True:
            if self.pass_due_at is not None and not await self._pass_left():
                # A visit moves its page past the pass's due time in the commit that
                # records it: none due means every one recorded. The frontier then
                # ends this worker's run once its queues and leases are empty.
                frontier.set_revisit_mode(False, True)
                return
            await self.reprice()
            await self.feed_once(frontier)
            await asyncio.sleep(POLL_S)

    async def reprice(self, force: bool = False) -> None:
        """The optimal schedule's price solved again from every page's rate (the
        proportional policy needs none): at most every REPRICE_MIN_S, and at most a
        tenth of the time. The rates are grouped in PostgreSQL, one query: a few
        hundred groups come back, not a row a page (bench/bench_reprice.py); the price
        is solved on a thread (~0.2 s)."""
        if self.window.policy == PROPORTIONAL:
            return
        now = time.monotonic()
        if not force and now < self._reprice_after:
            return
        groups = await self._pg(lambda conn: pv.job_rate_groups(conn, self.job_id))
        bounds, policy = self.window.bounds, self.window.policy
        self.schedule = await asyncio.to_thread(priced_schedule, groups, bounds, policy)
        took = time.monotonic() - now
        self._reprice_after = time.monotonic() + max(REPRICE_MIN_S, 10 * took)

    async def _pass_left(self) -> bool:
        due_at = self.pass_due_at
        assert due_at is not None
        return await self._pg(lambda conn: pg_passes.pages_left(conn, self.job_id, due_at))

    async def feed_once(self, frontier: RedisFrontier) -> int:
        """One poll, if this worker has the feeder's turn; returns the pages queued."""
        poll, pending = await frontier.revisits.begin_poll(FEED_TURN_S)
        room = MAX_PENDING - pending
        if poll == 0 or room <= 0:
            return 0
        now = time.time()
        due_by = now if self.pass_due_at is None else min(now, self.pass_due_at)
        due = await self._pg(lambda conn: pv.claim_due(conn, self.job_id, now, room,
                                                       now + self.claim_s, due_by))  # fmt: skip
        requests = [revisit_request(state, depth) for state, depth in due]
        refused = await frontier.revisits.add(poll, requests)
        if refused:  # a newer poll began meanwhile (this one stalled): claim them again
            urls = [r.url for r in refused]
            await self._pg(lambda conn: pv.release(conn, self.job_id, urls))
        return len(requests) - len(refused)

    async def _pg(self, operation: Callable[[psycopg.AsyncConnection], Awaitable[T]]) -> T:
        async def run() -> T:
            async with self.store.pool.connection() as conn:
                return await operation(conn)

        return await guarded(self.store.health, run)

    def close(self) -> None:
        self.warc.close()
