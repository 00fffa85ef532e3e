"""On-demand revisit passes of distributed jobs in PostgreSQL (issue 15): what `POST
/api/v1/jobs/{id}/recrawl` and `trawler recrawl --postgres` store, and what the
workers read to carry a pass out (migration 10, pgschema_steps.py ``PASSES``).

A pass makes every stored page of the job due now: pages without a revisit state
(a job that was not continuous) get one first, as a continuous job's pages get it at
their commit (pg_versions.py ``seed``), with the validators the crawl got: the
crawl's answers are in the WARC files of the workers, maybe on other machines, so a
job's commits keep each page's ETag and Last-Modified in ``page_validators``
(``validator_writes``; migration 12). The workers' feed then claims
the due pages as for a continuous job (dist_revisits.py); a visit moves its page's due
time past the pass's ``due_at``, so the pass is over when no page is due by then.

Every write here runs in the caller's transaction, the one that locks the job's row
and records its change of state (jobs/postgres_passes.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import psycopg

from trawler.recrawl import RevisitWindow, lastmod_epoch, prior_rate
from trawler.recrawl_visit import validators
from trawler.store import pg_versions as pv
from trawler.store.base import UrlOutcome


@dataclass(slots=True, frozen=True)
class RevisitPass:
    job_id: str
    due_at: float  # the pass's pages: those due by then
    back_to: str  # the job's state before the pass, and after it
    window: RevisitWindow  # the estimates of this pass's visits are clamped to it
    pages: int  # pages due when it began


SEED_CHUNK = 5_000  # pages given a revisit state per round trip
_UNSEEDED = (
    "SELECT p.url, p.fetched_at, p.sitemap_lastmod, p.sitemap_changefreq, v.etag,"
    " v.last_modified FROM pages p LEFT JOIN page_validators v"
    " ON v.job_id = p.job_id AND v.url = p.url"
    " WHERE p.job_id = %s AND p.kind = 'page' AND p.status BETWEEN 200 AND 299"
    f" AND {pv.REVISITABLE.replace('error', 'p.error')} AND p.fetched_at IS NOT NULL"
    " AND NOT EXISTS"
    " (SELECT 1 FROM revisit_state s WHERE s.job_id = p.job_id AND s.url = p.url)"
)


async def begin(
    conn: psycopg.AsyncConnection, job_id: str, back_to: str, window: RevisitWindow, now: float
) -> int:
    """Every stored page of the job due at ``now`` and the pass recorded; returns how
    many pages it has (0: nothing to revisit)."""
    # Read by a server-side cursor, seeded a chunk at a time: memory stays flat for
    # a job of millions of pages (the cursor's snapshot does not see its own seeds).
    async with conn.cursor(name="trawler_unseeded") as unseeded, conn.cursor() as cur:
        await unseeded.execute(_UNSEEDED, (job_id,))
        while rows := await unseeded.fetchmany(SEED_CHUNK):
            await pv.seed(cur, job_id, [_seed_row(row, window, now) for row in rows])
        # least(): a page overdue already keeps its due time, which a visit of it in
        # flight (a cancelled continuous job's) is recorded against.
        await cur.execute(
            "UPDATE revisit_state SET next_visit_at = least(next_visit_at, %s),"
            " claimed_until = NULL WHERE job_id = %s", (now, job_id),
        )  # fmt: skip
        pages = cur.rowcount
        await cur.execute(
            "INSERT INTO revisit_passes (job_id, due_at, back_to, revisit_min_s, revisit_max_s,"
            " pages) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (job_id) DO UPDATE SET"
            " due_at = excluded.due_at, back_to = excluded.back_to, pages = excluded.pages,"
            " revisit_min_s = excluded.revisit_min_s, revisit_max_s = excluded.revisit_max_s",
            (job_id, now, back_to, window.min_s, window.max_s, pages),
        )
    return pages


def _seed_row(row: tuple, window: RevisitWindow, now: float) -> pv.SeedRow:
    """Due now; its first estimate from the sitemap entry, as a crawl's (recrawl_store.py)."""
    url, fetched_at, lastmod, changefreq, etag, last_modified = row
    changed_at = lastmod_epoch(lastmod)
    age = fetched_at - changed_at if changed_at is not None else None
    return pv.SeedRow(url, etag, last_modified, now, prior_rate(changefreq, age, window))


_KEEP_VALIDATORS = (
    "INSERT INTO page_validators (job_id, url, etag, last_modified) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (job_id, url) DO UPDATE SET etag = excluded.etag,"
    " last_modified = excluded.last_modified"
)


def validator_writes(
    job_id: str, outcomes: Sequence[UrlOutcome]
) -> Callable[[psycopg.AsyncCursor], Awaitable[None]] | None:
    """What a commit of a job without revisit state also writes: the ETag and
    Last-Modified of each page stored with either (None: no page has one)."""
    rows = []
    for outcome in outcomes:
        page, result = outcome.page, outcome.result
        if page is None or result is None or not pv.revisitable(page):
            continue  # as _UNSEEDED: a pass revisits the pages stored whole
        etag, last_modified = validators(result.headers)
        if etag is not None or last_modified is not None:
            rows.append((job_id, page.url, etag, last_modified))
    if not rows:
        return None

    async def write(cur: psycopg.AsyncCursor) -> None:
        await cur.executemany(_KEEP_VALIDATORS, rows)

    return write


async def get(conn: psycopg.AsyncConnection, job_id: str) -> RevisitPass | None:
    cur = await conn.execute(
        "SELECT due_at, back_to, revisit_min_s, revisit_max_s, pages FROM revisit_passes"
        " WHERE job_id = %s", (job_id,),
    )  # fmt: skip
    row = await cur.fetchone()
    if row is None:
        return None
    due_at, back_to, low, high, pages = row
    return RevisitPass(job_id, due_at, back_to, RevisitWindow(low, high), pages)


async def job_ids(conn: psycopg.AsyncConnection) -> set[str]:
    """Jobs with a pass recorded (running, or stopped by a pause or a cancel)."""
    cur = await conn.execute("SELECT job_id FROM revisit_passes")
    return {row[0] for row in await cur.fetchall()}


async def pages_left(conn: psycopg.AsyncConnection, job_id: str, due_at: float) -> bool:
    """Whether a page of the pass is still due (not visited, or its visit not committed)."""
    cur = await conn.execute(
        "SELECT 1 FROM revisit_state WHERE job_id = %s AND next_visit_at <= %s LIMIT 1",
        (job_id, due_at),
    )
    return await cur.fetchone() is not None


async def end(conn: psycopg.AsyncConnection, job_id: str) -> None:
    await conn.execute("DELETE FROM revisit_passes WHERE job_id = %s", (job_id,))
