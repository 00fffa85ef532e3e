"""A job's own rows in the distributed store: its ``jobs`` row, its state, and its
scope (the hosts of its seeds, ``job_scope_hosts``), as the crawl and the workers
use them (jobs/postgres.py is the job store with transitions and events).

``JobRows`` is a part of ``PostgresStore`` (postgres.py), which builds the state
declared below; its methods are the store's own, not a layer in front of them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trawler.config import CrawlConfig, stored_config

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

JOB_STATES = ("pending", "running", "paused", "cancelled", "finished", "failed")

_ADD_SCOPE_HOST = "INSERT INTO job_scope_hosts VALUES (%s, %s) ON CONFLICT DO NOTHING"


@dataclass(slots=True)
class JobInfo:
    """A job as listed: no config (``get_job`` reads one job's)."""

    id: str
    state: str
    created_at: float  # Unix time, seconds
    updated_at: float


class JobRows:
    """Creating, reading and changing a job's row, and its scope (module doc)."""

    # PostgresStore's pool and its retried call (postgres.py).
    pool: AsyncConnectionPool
    _call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

    async def create_job(self, config: CrawlConfig, state: str = "pending") -> str:
        _check_state(state)
        job_id = uuid.uuid4().hex[:12]

        async def insert() -> None:
            async with self.pool.connection() as conn, conn.transaction():
                await insert_job(conn, job_id, config, state)

        await self._call(insert)
        return job_id

    @contextlib.asynccontextmanager
    async def creating_job(
        self, config: CrawlConfig, state: str = "pending", scope_hosts: Iterable[str] = ()
    ) -> AsyncIterator[str]:
        """A new job's id; its row and its scope (the seeds' hosts) are committed
        only if the ``async with`` body succeeds."""
        _check_state(state)
        job_id = uuid.uuid4().hex[:12]
        async with self.pool.connection() as conn, conn.transaction():
            await insert_job(conn, job_id, config, state)
            async with conn.cursor() as cur:
                await cur.executemany(_ADD_SCOPE_HOST, [(job_id, h) for h in scope_hosts])
            yield job_id

    async def scope_hosts(self, job_id: str) -> list[str]:
        """The hosts of the job's seeds (host keys): its scope."""

        async def select() -> list[Any]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT host FROM job_scope_hosts WHERE job_id = %s", (job_id,)
                )
                return await cur.fetchall()

        return [host for (host,) in await self._call(select)]

    async def add_scope_hosts(self, job_id: str, hosts: Iterable[str]) -> None:
        rows = [(job_id, host) for host in hosts]

        async def insert() -> None:
            async with self.pool.connection() as conn, conn.cursor() as cur:
                await cur.executemany(_ADD_SCOPE_HOST, rows)

        if rows:
            await self._call(insert)

    async def get_job(self, job_id: str) -> tuple[CrawlConfig, str]:
        """The job's config and state; KeyError when there is no such job."""

        async def select() -> Any:
            async with self.pool.connection() as conn:
                cur = await conn.execute("SELECT config, state FROM jobs WHERE id = %s", (job_id,))
                return await cur.fetchone()

        row = await self._call(select)
        if row is None:
            raise KeyError(job_id)
        return stored_config(row[0])[0], row[1]

    async def list_jobs(self, states: Sequence[str] | None = None) -> list[JobInfo]:
        """The jobs in ``states`` (all when None), newest first, without their configs."""
        where = "WHERE state = ANY(%s)" if states is not None else ""

        async def select() -> list[Any]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT id, state, extract(epoch FROM created_at)::float8,"
                    f" extract(epoch FROM updated_at)::float8 FROM jobs {where}"
                    " ORDER BY created_at DESC, id",
                    (list(states),) if states is not None else None,
                )
                return await cur.fetchall()

        return [JobInfo(*row) for row in await self._call(select)]

    async def set_job_state(self, job_id: str, state: str) -> None:
        _check_state(state)

        async def update() -> int:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    "UPDATE jobs SET state = %s, updated_at = now() WHERE id = %s", (state, job_id)
                )
                return cur.rowcount

        if await self._call(update) == 0:
            raise KeyError(job_id)


async def insert_job(
    conn: psycopg.AsyncConnection, job_id: str, config: CrawlConfig, state: str,
    seeding: bool = False,
) -> None:  # fmt: skip
    """A job's row and its creation event (jobs/postgres.py), in the caller's transaction."""
    await conn.execute(
        "INSERT INTO jobs (id, config, state, seeding, started_at)"
        " VALUES (%s, %s::jsonb, %s, %s, CASE WHEN %s THEN now() END)",
        (job_id, config.model_dump_json(), state, seeding, state == "running"),
    )
    await conn.execute(
        "INSERT INTO job_events (job_id, from_state, to_state, at, reason)"
        " VALUES (%s, NULL, %s, extract(epoch FROM now()), 'created')",
        (job_id, state),
    )


def _check_state(state: str) -> None:
    if state not in JOB_STATES:
        raise ValueError(f"job state must be one of {', '.join(JOB_STATES)}, not {state!r}")
