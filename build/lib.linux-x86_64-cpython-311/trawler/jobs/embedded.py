"""The embedded job store: the registry ``DATA/jobs.db`` of a data directory's jobs.

Each job's crawl data is in ``DATA/jobs/<id>/`` (jobs/layout.py); the registry
keeps only what a job is: its state, options, times and seeding flag, and its
``job_events``. Many processes may read and write it (WAL, busy timeout): a
`trawler crawl` sets a job running, `trawler jobs pause` from another shell
pauses it, and the crawl sees it at its next poll. Each call opens its own
short-lived connection on a thread, so no connection crosses a thread or a fork.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from trawler.config import CrawlConfig, stored_config
from trawler.jobs.layout import REGISTRY_NAME, job_dir, job_numbers
from trawler.jobs.model import (
    JobEvent,
    JobInfo,
    JobState,
    UnknownJob,
    check_revisit,
    check_transition,
)
from trawler.jobs.store import DEFAULT_PAGE, job_options

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY,        -- creation order (newest first in lists)
    id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,            -- jobs/model.py JobState
    options TEXT NOT NULL,          -- CrawlConfig JSON, never the seeds
    created_at REAL NOT NULL,
    started_at REAL,                -- first time it became running
    finished_at REAL,               -- when it ended
    seeding INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, seq);
CREATE TABLE IF NOT EXISTS job_events (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    from_state TEXT,                -- NULL: the job's creation
    to_state TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS job_events_by_job ON job_events (job_id, id);
-- Operators' controls over every job (jobs/embedded_controls.py).
CREATE TABLE IF NOT EXISTS blocklist (
    domain TEXT PRIMARY KEY,        -- blocklist.blocklist_domain's canonical form
    reason TEXT NOT NULL DEFAULT '',
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,          -- politeness.<field>, or control_version
    value                           -- NULL: unset (jobs keep their own)
);
"""

BUSY_TIMEOUT_S = 10.0
_COLUMNS = "id, state, options, created_at, started_at, finished_at, seeding"


def open_registry(data_dir: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """The registry's connection; created (with its schema) when writable."""
    path = data_dir / REGISTRY_NAME
    if readonly:
        if not path.exists():
            raise FileNotFoundError(f"no jobs in {data_dir} (missing {REGISTRY_NAME})")
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    _use_wal(conn)
    conn.execute("PRAGMA synchronous=FULL")  # a state change survives a power cut
    conn.executescript(SCHEMA)
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. SQLite does not wait on a busy file for this switch: while
    another process or thread is creating the same new registry, it fails at once
    with 'database is locked', so it is retried for as long as a write would wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: the read of a state and its change are one step across processes."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def insert_job(
    conn: sqlite3.Connection, job_id: str, state: JobState, options_json: str,
    created_at: float, reason: str, seeding: bool = False,
) -> None:  # fmt: skip
    """A job row and its creation event (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO jobs (id, state, options, created_at, seeding) VALUES (?, ?, ?, ?, ?)",
        (job_id, state.value, options_json, created_at, int(seeding)),
    )
    conn.execute(
        "INSERT INTO job_events (job_id, from_state, to_state, at, reason)"
        " VALUES (?, NULL, ?, ?, ?)",
        (job_id, state.value, created_at, reason),
    )


class EmbeddedJobStore:
    """The jobs of one data directory (the ``JobStore`` contract, jobs/store.py)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def job_dir(self, job_id: str) -> Path:
        return job_dir(self.data_dir, job_id)

    async def _run(self, fn: Callable[..., T], *args: Any, readonly: bool = False) -> T:
        def call() -> T:
            conn = open_registry(self.data_dir, readonly=readonly)
            try:
                return fn(conn, *args)
            finally:
                conn.close()

        return await asyncio.to_thread(call)

    # -- the contract --------------------------------------------------------------
    async def create(self, config: CrawlConfig, *, seeding: bool = False) -> str:
        job_id = uuid.uuid4().hex[:12]

        def insert(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                insert_job(conn, job_id, JobState.PENDING, config.model_dump_json(),
                           time.time(), "created", seeding)  # fmt: skip

        await self._run(insert)
        return job_id

    async def get(self, job_id: str) -> JobInfo:
        info = await self._run(_select_job, job_id)
        info.events = await self.events(job_id)
        numbers = await asyncio.to_thread(job_numbers, self.job_dir(job_id))
        info.pages_crawled, info.urls_queued, info.errors = numbers
        return info

    async def list(
        self, states: Sequence[JobState] | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> tuple[builtins.list[JobInfo], int]:
        return await self._run(_select_jobs, states, offset, limit)

    async def transition(self, job_id: str, state: JobState, reason: str = "") -> JobInfo:
        def change(conn: sqlite3.Connection) -> JobInfo:
            with write_transaction(conn):
                info = _select_job(conn, job_id)
                check_transition(job_id, info.state, state)
                return _record_change(conn, info, state, reason)

        return await self._run(change)

    async def events(self, job_id: str) -> builtins.list[JobEvent]:
        def select(conn: sqlite3.Connection) -> builtins.list[Any]:
            _select_job(conn, job_id)  # UnknownJob
            return conn.execute(
                "SELECT job_id, from_state, to_state, at, reason FROM job_events"
                " WHERE job_id = ? ORDER BY id",
                (job_id,),
            ).fetchall()

        return [_event(row) for row in await self._run(select)]

    async def config(self, job_id: str) -> CrawlConfig:
        row = await self._run(
            lambda conn: conn.execute("SELECT options FROM jobs WHERE id = ?", (job_id,)).fetchone()
        )
        if row is None:
            raise UnknownJob(job_id)
        return stored_config(row[0])[0]

    async def set_seeding(self, job_id: str, seeding: bool) -> None:
        await asyncio.to_thread(mark_seeding, self.data_dir, job_id, seeding)

    async def state(self, job_id: str) -> JobState:
        """The job's state alone: what a running crawl polls (jobs/follow.py)."""
        return await self._run(_select_state, job_id)

    # -- embedded only -------------------------------------------------------------
    async def set_config(self, job_id: str, config: CrawlConfig) -> None:
        """New options for a resumed job (options given again on its command line)."""
        await self._update(job_id, "options = ?", config.model_dump_json())

    async def startable(
        self, reasons: Sequence[str], job_id: str | None = None
    ) -> builtins.list[tuple[str, JobState]]:
        """Jobs a runner may start, oldest first: pending ones whose seeds are all in,
        and paused ones whose last event's reason is one of ``reasons`` (paused by a
        process that ended, not by a user). ``job_id``: that job only, if it is one."""

        def select(conn: sqlite3.Connection) -> builtins.list[tuple[str, JobState]]:
            marks = ", ".join("?" * len(reasons)) or "NULL"
            rows = conn.execute(
                "SELECT id, state FROM jobs j WHERE (? IS NULL OR id = ?) AND"
                " ((state = 'pending' AND seeding = 0) OR (state = 'paused' AND"
                " (SELECT reason FROM job_events e WHERE e.job_id = j.id ORDER BY e.id DESC"
                f" LIMIT 1) IN ({marks}))) ORDER BY seq",
                (job_id, job_id, *reasons),
            ).fetchall()
            return [(row[0], JobState(row[1])) for row in rows]

        return await self._run(select)

    async def reopen(self, job_id: str, reason: str) -> JobInfo:
        """A finished or cancelled job running again for a revisit pass (jobs/model.py
        ``REVISITABLE``; ``NotRevisitable`` otherwise), checked and recorded in one
        step like ``transition``; its ``finished_at`` is cleared until it ends again."""

        def change(conn: sqlite3.Connection) -> JobInfo:
            with write_transaction(conn):
                info = _select_job(conn, job_id)
                check_revisit(job_id, info.state)
                conn.execute("UPDATE jobs SET finished_at = NULL WHERE id = ?", (job_id,))
                return _record_change(conn, info, JobState.RUNNING, reason)

        return await self._run(change)

    async def _update(self, job_id: str, assignment: str, value: Any) -> None:
        def update(conn: sqlite3.Connection) -> int:
            return conn.execute(
                f"UPDATE jobs SET {assignment} WHERE id = ?", (value, job_id)
            ).rowcount

        if await self._run(update) == 0:
            raise UnknownJob(job_id)


def mark_seeding(data_dir: Path, job_id: str, seeding: bool) -> None:
    """Seeds are (no longer) going in; callable from the crawl's writer thread."""
    conn = open_registry(data_dir)
    try:
        changed = conn.execute(
            "UPDATE jobs SET seeding = ? WHERE id = ?", (int(seeding), job_id)
        ).rowcount
    finally:
        conn.close()
    if changed == 0:
        raise UnknownJob(job_id)


def _info(row: Sequence[Any]) -> JobInfo:
    job_id, state, options, created, started, finished, seeding = row
    config = stored_config(options)[0]
    return JobInfo(job_id, JobState(state), job_options(config), created, started, finished,
                   bool(seeding))  # fmt: skip


def _event(row: Sequence[Any]) -> JobEvent:
    job_id, from_state, to_state, at, reason = row
    return JobEvent(job_id, JobState(from_state) if from_state else None, JobState(to_state),
                    at, reason)  # fmt: skip


def _record_change(
    conn: sqlite3.Connection, info: JobInfo, state: JobState, reason: str
) -> JobInfo:
    """The job's new state and its event, inside the caller's checked transaction."""
    now = time.time()
    conn.execute(
        "UPDATE jobs SET state = ?,"
        " started_at = CASE WHEN ? AND started_at IS NULL THEN ? ELSE started_at END,"
        " finished_at = CASE WHEN ? THEN ? ELSE finished_at END WHERE id = ?",
        (state.value, state is JobState.RUNNING, now, state.ended, now, info.id),
    )
    conn.execute(
        "INSERT INTO job_events (job_id, from_state, to_state, at, reason) VALUES (?, ?, ?, ?, ?)",
        (info.id, info.state.value, state.value, now, reason),
    )
    return _select_job(conn, info.id)


def _select_job(conn: sqlite3.Connection, job_id: str) -> JobInfo:
    row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise UnknownJob(job_id)
    return _info(row)


def _select_state(conn: sqlite3.Connection, job_id: str) -> JobState:
    row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise UnknownJob(job_id)
    return JobState(row[0])


def _select_jobs(
    conn: sqlite3.Connection, states: Sequence[JobState] | None, offset: int, limit: int
) -> tuple[list[JobInfo], int]:
    where = ""
    params: tuple[str, ...] = ()
    if states is not None:
        where = f"WHERE state IN ({', '.join('?' * len(states))})"
        params = tuple(JobState(s).value for s in states)
    total = conn.execute(f"SELECT count(*) FROM jobs {where}", params).fetchone()[0]
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY seq DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    return [_info(row) for row in rows], total
