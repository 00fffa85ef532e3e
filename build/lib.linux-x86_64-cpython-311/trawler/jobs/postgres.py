"""The distributed job store: the ``jobs`` and ``job_events`` tables of PostgreSQL
(migration 5, store/pgschema_steps.py), over a ``PostgresStore``'s pool.

A transition locks the job's row (``SELECT … FOR UPDATE``) for its check and
its change, so two processes changing one job at once are serialised and the
second is checked against the first's result. Times are PostgreSQL's clock,
one for every worker.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

from trawler.config import CrawlConfig, stored_config
from trawler.jobs.model import JobEvent, JobInfo, JobState, UnknownJob, check_transition
from trawler.jobs.store import DEFAULT_PAGE, job_options
from trawler.store.postgres import PostgresStore, insert_job

_COLUMNS = (
    "id, state, config, extract(epoch FROM created_at)::float8,"
    " extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8, seeding"
)


class PostgresJobStore:
    """Every job of a distributed deployment (the ``JobStore`` contract, jobs/store.py)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def create(self, config: CrawlConfig, *, seeding: bool = False) -> str:
        job_id = uuid.uuid4().hex[:12]

        async def insert() -> None:
            async with self.store.pool.connection() as conn, conn.transaction():
                await insert_job(conn, job_id, config, JobState.PENDING.value, seeding)

        await self.store._call(insert)
        return job_id

    async def get(self, job_id: str) -> JobInfo:
        async def select() -> JobInfo:
            async with self.store.pool.connection() as conn:
                info = await _select_job(conn, job_id)
                info.events = await _select_events(conn, job_id)
                info.pages_crawled, info.errors = await _numbers(conn, job_id)
                return info

        return await self.store._call(select)

    async def list(
        self, states: Sequence[JobState] | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> tuple[builtins.list[JobInfo], int]:
        where = "WHERE state = ANY(%s)" if states is not None else ""
        params: tuple = ([JobState(s).value for s in states],) if states is not None else ()

        async def select() -> tuple[builtins.list[JobInfo], int]:
            async with self.store.pool.connection() as conn:
                cur = await conn.execute(f"SELECT count(*) FROM jobs {where}", params)
                total = (await cur.fetchone() or (0,))[0]
                cur = await conn.execute(
                    f"SELECT {_COLUMNS} FROM jobs {where}"
                    " ORDER BY created_at DESC, seq DESC OFFSET %s LIMIT %s",
                    (*params, offset, limit),
                )
                return [_info(row) for row in await cur.fetchall()], total

        return await self.store._call(select)

    async def transition(self, job_id: str, state: JobState, reason: str = "") -> JobInfo:
        async def change() -> JobInfo:
            async with self.store.pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    "SELECT state FROM jobs WHERE id = %s FOR UPDATE", (job_id,)
                )
                row = await cur.fetchone()
                if row is None:
                    raise UnknownJob(job_id)
                current = JobState(row[0])
                check_transition(job_id, current, state)
                await _record(conn, job_id, current, state, reason)
                return await _select_job(conn, job_id)

        return await self.store._call(change)

    async def events(self, job_id: str) -> builtins.list[JobEvent]:
        async def select() -> builtins.list[JobEvent]:
            async with self.store.pool.connection() as conn:
                await _select_job(conn, job_id)  # UnknownJob
                return await _select_events(conn, job_id)

        return await self.store._call(select)

    async def state(self, job_id: str) -> JobState:
        """The job's state alone: what a running worker polls (jobs/follow.py)."""

        async def select() -> Any:
            async with self.store.pool.connection() as conn:
                cur = await conn.execute("SELECT state FROM jobs WHERE id = %s", (job_id,))
                return await cur.fetchone()

        row = await self.store._call(select)
        if row is None:
            raise UnknownJob(job_id)
        return JobState(row[0])

    async def config(self, job_id: str) -> CrawlConfig:
        try:
            return (await self.store.get_job(job_id))[0]
        except KeyError:
            raise UnknownJob(job_id) from None

    async def set_seeding(self, job_id: str, seeding: bool) -> None:
        async def update() -> int:
            async with self.store.pool.connection() as conn:
                cur = await conn.execute(
                    "UPDATE jobs SET seeding = %s WHERE id = %s", (seeding, job_id)
                )
                return cur.rowcount

        if await self.store._call(update) == 0:
            raise UnknownJob(job_id)


async def _record(
    conn: psycopg.AsyncConnection, job_id: str, current: JobState, state: JobState, reason: str
) -> None:
    await conn.execute(
        "UPDATE jobs SET state = %s, updated_at = now(),"
        " started_at = CASE WHEN %s THEN coalesce(started_at, now()) ELSE started_at END,"
        " finished_at = CASE WHEN %s THEN now() ELSE finished_at END WHERE id = %s",
        (state.value, state is JobState.RUNNING, state.ended, job_id),
    )
    await conn.execute(
        "INSERT INTO job_events (job_id, from_state, to_state, at, reason)"
        " VALUES (%s, %s, %s, extract(epoch FROM now()), %s)",
        (job_id, current.value, state.value, reason),
    )


async def _select_job(conn: psycopg.AsyncConnection, job_id: str) -> JobInfo:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    if row is None:
        raise UnknownJob(job_id)
    return _info(row)


async def _select_events(conn: psycopg.AsyncConnection, job_id: str) -> builtins.list[JobEvent]:
    cur = await conn.execute(
        "SELECT job_id, from_state, to_state, at, reason FROM job_events"
        " WHERE job_id = %s ORDER BY id",
        (job_id,),
    )
    return [
        JobEvent(job, JobState(old) if old else None, JobState(new), at, reason)
        for job, old, new, at, reason in await cur.fetchall()
    ]


async def _numbers(conn: psycopg.AsyncConnection, job_id: str) -> tuple[int, int]:
    """(pages crawled, errors): the frontier's numbers are in Redis, not here."""
    cur = await conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE error IS NOT NULL AND error <> 'not_html')"
        " FROM pages WHERE job_id = %s",
        (job_id,),
    )
    row = await cur.fetchone()
    return (row[0], row[1]) if row else (0, 0)


def _info(row: Sequence[Any]) -> JobInfo:
    job_id, state, config, created, started, finished, seeding = row
    options = job_options(stored_config(config)[0])
    return JobInfo(job_id, JobState(state), options, created, started, finished, seeding)
