"""A revisit pass of a distributed job (issue 15): started by `POST
/api/v1/jobs/{id}/recrawl` (api/distributed.py) and `trawler recrawl --postgres`,
carried out by the `trawler worker`s (worker.py), ended by the worker that finds no
page of it left.

As on the embedded backend (jobs/runner.py ``start_revisits``), only a finished or
cancelled job may have one: it runs (reason ``recrawl``) until every page due when
the pass began has been visited once, then goes back to the state it had (reason
``recrawl done``). A pass is not paused (cancel ends it, the job then cancelled); a
pause made anyway (`trawler jobs pause`) stops it, and a resume carries it on.

The start is one PostgreSQL transaction: the job's row locked, its state checked, its
pages made due, the pass and the change of state recorded (store/pg_passes.py). The
job's revisit lanes in Redis are emptied first: entries a cancelled continuous job
or an earlier pass left there would hold their pages out of the new feed.
"""

from __future__ import annotations

import time

import psycopg

from trawler.frontier.redis_conn import connect_redis
from trawler.frontier.redis_revisits import reset_lanes
from trawler.jobs.model import JobState, NotRevisitable, UnknownJob, check_revisit
from trawler.jobs.postgres import PostgresJobStore, _record
from trawler.recrawl import RevisitWindow
from trawler.store import pg_passes
from trawler.store.pg_passes import RevisitPass
from trawler.store.postgres import PostgresStore

REVISIT_PASS = "recrawl"  # the reason of a pass's start (jobs/runner.py's too)
REVISIT_PASS_DONE = "recrawl done"  # ... and of its end


async def start_pass(
    store: PostgresStore, redis_url: str, job_id: str, window: RevisitWindow
) -> int:
    """Start a pass of the job; returns its pages. ``UnknownJob``, ``NotRevisitable``
    (its state, or no stored page)."""
    check_revisit(job_id, await PostgresJobStore(store).state(job_id))  # before Redis
    client = connect_redis(redis_url, 2)
    try:
        await reset_lanes(client, job_id)
    finally:
        await client.aclose()

    async def begin() -> int:
        async with store.pool.connection() as conn, conn.transaction():
            current = await _locked_state(conn, job_id)
            check_revisit(job_id, current)
            pages = await pg_passes.begin(conn, job_id, current.value, window, time.time())
            if pages == 0:  # rolled back: the job stays as it was
                raise NotRevisitable(job_id, current, "it stored no page: nothing to revisit")
            await conn.execute("UPDATE jobs SET finished_at = NULL WHERE id = %s", (job_id,))
            await _record(conn, job_id, current, JobState.RUNNING, REVISIT_PASS)
            return pages

    return await store._call(begin)


async def pass_of(store: PostgresStore, job_id: str) -> RevisitPass | None:
    async def read() -> RevisitPass | None:
        async with store.pool.connection() as conn:
            return await pg_passes.get(conn, job_id)

    return await store._call(read)


async def jobs_in_a_pass(store: PostgresStore) -> set[str]:
    async def read() -> set[str]:
        async with store.pool.connection() as conn:
            return await pg_passes.job_ids(conn)

    return await store._call(read)


async def end_pass(store: PostgresStore, job_id: str) -> bool:
    """The job back to the state it had before its pass, unless it is not running it
    any more (cancelled or paused meanwhile: that stays); True if it went back."""

    async def end() -> bool:
        async with store.pool.connection() as conn, conn.transaction():
            current = await _locked_state(conn, job_id)
            found = await pg_passes.get(conn, job_id)
            if found is None or current is not JobState.RUNNING:
                return False
            await pg_passes.end(conn, job_id)
            await _record(conn, job_id, current, JobState(found.back_to), REVISIT_PASS_DONE)
            return True

    return await store._call(end)


async def check_pausable(store: PostgresStore, job_id: str) -> None:
    """``NotRevisitable`` for a running job in a pass: cancel ends one, pause does not."""
    state = await PostgresJobStore(store).state(job_id)
    if state is JobState.RUNNING and await pass_of(store, job_id) is not None:
        raise NotRevisitable(job_id, state, "a recrawl pass is not paused: cancel it")


async def _locked_state(conn: psycopg.AsyncConnection, job_id: str) -> JobState:
    cur = await conn.execute("SELECT state FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
    row = await cur.fetchone()
    if row is None:
        raise UnknownJob(job_id)
    return JobState(row[0])
