"""Page versions and revisit state in PostgreSQL (issue 15, distributed backend): the
embedded tables (store/versions.py) keyed by job, created by migration 8
(pgschema_steps.py ``REVISITS``).

Every write here runs inside the transaction of a commit batch (store/pg_commit.py
``store_outcomes(also=...)``), so a page's revisit state is seeded with its page row
and a visit is recorded whole with its state: a kill at any moment leaves no visit
without its state, nor a state moved on without its visit.

A visit is recorded against the due time it was handed out for (its state's
``next_visit_at``, carried in the Redis entry): the row is locked and compared first,
so a commit retried after an unknown outcome, or a visit of a due time recorded
already, changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import psycopg

from trawler.outcome import NOT_HTML
from trawler.records import FetchResult, PageRecord
from trawler.recrawl import RevisitWindow
from trawler.recrawl_store import _version_values, next_state, rate_from_history
from trawler.recrawl_visit import CHANGED, Judgement, RevisitOutcome
from trawler.revisit_policy import RATE_LOG_STEP, RevisitSchedule
from trawler.safetext import safe_text
from trawler.store.pg_versions_read import (
    HAS_VERSIONS,
    newer_query,
    version_row,
    versions_query,
    with_versions,
)
from trawler.store.versions import STATE_COLUMNS, VERSION_COLUMNS, RevisitState

_STATE = ", ".join(STATE_COLUMNS)


@dataclass(slots=True)
class SeedRow:
    """A stored page's first revisit state: validators of the crawl's answer (not in
    ``pages``), when it is due and the first estimate (recrawl.prior_rate)."""

    url: str
    etag: str | None
    last_modified: str | None
    next_visit_at: float
    rate_per_s: float


# Pages a revisit can judge: stored whole, HTML or not (a PDF, its error `not_html`, is
# revisited by conditional GET too, as embedded: store/versions.py unseeded_pages).
REVISITABLE = f"(error IS NULL OR error = '{NOT_HTML}')"


def revisitable(page: PageRecord | None) -> bool:
    """A stored 2xx page of kind page, HTML or not (as ``REVISITABLE``)."""
    return (page is not None and page.kind == "page" and page.error in (None, NOT_HTML)
            and page.status is not None and 200 <= page.status < 300)  # fmt: skip


# Version 1 and the state come from the page row as stored: when two workers fetched
# the URL (a lease expired), the row that won (ON CONFLICT DO NOTHING) is the version.
_SEED_VERSION = (
    f"INSERT INTO page_versions (job_id, {', '.join(VERSION_COLUMNS)})"
    " SELECT job_id, url, 1, fetched_at, final_url, status, content_type, content_length,"
    " content_sha256, simhash, NULL, title, text, %s, %s, warc_file, warc_offset"
    " FROM pages WHERE job_id = %s AND url = %s AND kind = 'page'"
    f" AND status BETWEEN 200 AND 299 AND {REVISITABLE} ON CONFLICT DO NOTHING"
)
_SEED_STATE = (
    f"INSERT INTO revisit_state (job_id, {_STATE}, depth)"
    " SELECT job_id, url, coalesce(host, ''), coalesce(final_url, url), %s, %s,"
    " content_sha256, simhash, 1, fetched_at, fetched_at, %s, %s, coalesce(depth, 0)"
    " FROM pages WHERE job_id = %s AND url = %s AND kind = 'page'"
    f" AND status BETWEEN 200 AND 299 AND {REVISITABLE} ON CONFLICT DO NOTHING"
)


async def seed(cur: psycopg.AsyncCursor, job_id: str, rows: Sequence[SeedRow]) -> None:
    """Version 1 and the revisit state of pages just stored (in the batch's transaction)."""
    if not rows:
        return
    versions = [_storable(r.etag, r.last_modified, job_id, r.url) for r in rows]
    states = [_storable(r.etag, r.last_modified, r.next_visit_at, r.rate_per_s, job_id, r.url)
              for r in rows]  # fmt: skip
    await cur.executemany(_SEED_VERSION, versions)
    await cur.executemany(_SEED_STATE, states)


# FOR UPDATE SKIP LOCKED: two feeders claiming at once take disjoint rows, and neither
# waits for the other; a claim expires, so a feeder killed before its pages reached
# Redis loses nothing (store/dist_revisits.py).
_CLAIM = (
    "UPDATE revisit_state s SET claimed_until = %(until)s FROM ("
    " SELECT url FROM revisit_state WHERE job_id = %(job)s AND next_visit_at <= %(due)s"
    " AND (claimed_until IS NULL OR claimed_until <= %(now)s)"
    " ORDER BY next_visit_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due"
    f" WHERE s.job_id = %(job)s AND s.url = due.url"
    f" RETURNING {', '.join('s.' + name for name in STATE_COLUMNS)}, s.depth"
)


async def claim_due(
    conn: psycopg.AsyncConnection, job_id: str, now: float, limit: int, until: float,
    due_by: float | None = None,
) -> list[tuple[RevisitState, int]]:  # fmt: skip
    """(state, page depth) of at most ``limit`` pages due by ``due_by`` [now] nobody
    claimed, claimed until ``until``; soonest due first."""
    params = {"job": job_id, "now": now, "limit": limit, "until": until,
              "due": now if due_by is None else due_by}  # fmt: skip
    async with conn.transaction():
        rows = await (await conn.execute(_CLAIM, params)).fetchall()
    rows.sort(key=lambda row: row[STATE_COLUMNS.index("next_visit_at")])
    return [(RevisitState(*row[:-1]), row[-1]) for row in rows]


async def release(conn: psycopg.AsyncConnection, job_id: str, urls: Sequence[str]) -> None:
    """Claims given up (their feed was refused): the pages may be claimed at once."""
    await conn.execute(
        "UPDATE revisit_state SET claimed_until = NULL WHERE job_id = %s AND url = ANY(%s)",
        (job_id, list(urls)),
    )


async def record(
    cur: psycopg.AsyncCursor, job_id: str, outcome: RevisitOutcome,
    window: RevisitWindow | RevisitSchedule,
) -> bool:  # fmt: skip
    """One revisit's rows (store/versions.py's, keyed by job); False when its due
    time was recorded already (nothing written). ``window``: the interval rule (the
    job's priced schedule, or a window's proportional intervals)."""
    state = outcome.state
    await cur.execute(
        "SELECT 1 FROM revisit_state WHERE job_id = %s AND url = %s AND next_visit_at = %s"
        " FOR UPDATE", (job_id, state.url, state.next_visit_at),
    )  # fmt: skip
    if await cur.fetchone() is None:
        return False
    result, judgement = outcome.result, outcome.judgement
    if result is None or judgement is None:  # not fetched now: asked again later
        await cur.execute(
            "UPDATE revisit_state SET next_visit_at = %s, claimed_until = NULL"
            " WHERE job_id = %s AND url = %s", (outcome.defer_to, job_id, state.url),
        )  # fmt: skip
        return True
    await _add_visit(cur, job_id, outcome, result, judgement)
    new = next_state(state, result, judgement, window, await _rate(cur, job_id, state))
    if judgement.verdict == CHANGED or new.version != state.version:
        values = _version_values(new, result, judgement, outcome.warc_place)
        await cur.execute(
            f"INSERT INTO page_versions (job_id, {', '.join(VERSION_COLUMNS)})"
            f" VALUES (%s, {', '.join(['%s'] * len(VERSION_COLUMNS))}) ON CONFLICT DO NOTHING",
            _storable(job_id, *(values.get(name) for name in VERSION_COLUMNS)),
        )
    await _put_state(cur, job_id, new)
    return True


async def put_off(
    cur: psycopg.AsyncCursor, job_id: str, state: RevisitState, next_visit_at: float
) -> bool:
    """A visit that could not be recorded: its page due next at ``next_visit_at``, its
    state kept; False when that due time was recorded or put off already."""
    await cur.execute(
        "UPDATE revisit_state SET next_visit_at = %s, claimed_until = NULL"
        " WHERE job_id = %s AND url = %s AND next_visit_at = %s",
        (next_visit_at, job_id, state.url, state.next_visit_at),
    )
    return cur.rowcount == 1


async def _add_visit(cur: psycopg.AsyncCursor, job_id: str, outcome: RevisitOutcome,
                     result: FetchResult, judgement: Judgement) -> None:  # fmt: skip
    await cur.execute(
        "INSERT INTO visits (job_id, url, visited_at, status, verdict, distance, body_bytes,"
        " warc_file, warc_offset) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (job_id, outcome.state.url, result.started_at, result.status, judgement.verdict,
         judgement.distance, len(result.raw_body), *outcome.warc_place),
    )  # fmt: skip


# revisit_policy.rate_groups in one query, one pass over the job's rows: a few hundred
# classes come back, not a row a page (a worker read every page's rate, ~0.5 s and
# tens of MB a million pages, at each pricing). The class is the exponent k of
# revisit_policy.rate_class (e^(k·step)), made a float in Python; NULL: rate 0 (the
# CASE keeps ln() from it). PostgreSQL rounds halves away from zero, Python to even: a
# rate exactly between two classes may land in either, which moves its page's
# interval by at most the 3 % between them.
_RATE_GROUPS = """
SELECT CASE WHEN rate_per_s <= 0 THEN NULL ELSE round(ln(rate_per_s) / %s) END, count(*)
FROM revisit_state WHERE job_id = %s GROUP BY 1
"""


async def job_rate_groups(conn: psycopg.AsyncConnection, job_id: str) -> list[tuple[float, int]]:
    """The job's pages' change rates as (rate, pages), grouped as ``rate_groups``
    groups them, to price its revisit schedule (revisit_policy.py)."""
    async with conn.cursor() as cur:
        await cur.execute(_RATE_GROUPS, (RATE_LOG_STEP, job_id))
        return [
            (0.0 if k is None else math.exp(float(k) * RATE_LOG_STEP), int(n))
            for k, n in await cur.fetchall()
        ]


async def _rate(cur: psycopg.AsyncCursor, job_id: str, state: RevisitState) -> float:
    """The change rate from the page's whole history, this visit included."""
    await cur.execute(
        "SELECT visited_at, verdict FROM visits WHERE job_id = %s AND url = %s"
        " ORDER BY visited_at", (job_id, state.url),
    )  # fmt: skip
    history = [(float(at), str(verdict)) for at, verdict in await cur.fetchall()]
    await cur.execute(
        "SELECT fetched_at FROM page_versions WHERE job_id = %s AND url = %s AND version = 1",
        (job_id, state.url),
    )
    first = await cur.fetchone()
    return rate_from_history(state, float(first[0]) if first else 0.0, history)


async def _put_state(cur: psycopg.AsyncCursor, job_id: str, state: RevisitState) -> None:
    columns = [name for name in STATE_COLUMNS if name != "url"]
    await cur.execute(
        f"UPDATE revisit_state SET {', '.join(f'{name} = %s' for name in columns)},"
        " claimed_until = NULL WHERE job_id = %s AND url = %s",
        _storable(*(getattr(state, name) for name in columns), job_id, state.url),
    )


def _storable(*values: object) -> tuple[object, ...]:
    """Text PostgreSQL takes: a header's undecodable bytes and NUL (a server's ETag may
    have them) become U+FFFD, as in the page rows (store/pg_commit.py)."""
    return tuple(safe_text(v) if isinstance(v, str) else v for v in values)


async def versions_of(
    conn: psycopg.AsyncConnection, job_id: str, url: str | None, latest_only: bool
) -> AsyncIterator[dict]:
    """Version rows (as dicts, with ``gone``) of one URL or of every page, oldest first;
    or only each page's latest (store/versions.py ``versions_of``)."""
    sql, params = versions_query(job_id, url, latest_only)
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        async for row in cur:
            yield version_row(row)


async def has_versions(conn: psycopg.AsyncConnection, job_id: str) -> bool:
    """True when some page of the job has a version beyond the crawl's."""
    cur = await conn.execute(HAS_VERSIONS, (job_id,))
    return await cur.fetchone() is not None


async def versioned_rows(
    conn: psycopg.AsyncConnection, job_id: str, rows: AsyncIterator[dict], which: str
) -> AsyncIterator[dict]:
    """The export's rows with a ``version`` each, as export_versions.py makes them for
    the embedded store; looked up per row (by primary key), so memory stays flat."""
    async for row in rows:
        newer = [] if row.get("kind") == "robots" else await (
            await conn.execute(newer_query(row), (job_id, row["url"]))).fetchall()  # fmt: skip
        for version in with_versions(row, newer, which):
            yield version
