"""``JobService`` over a data directory: its jobs (``DATA/jobs.db``, each job's
data in ``DATA/jobs/<id>/``), or the one job of an older directory
(``DATA/trawler.db`` at the top, read where it is).

It reads what `trawler crawl` stored (read-only, so a crawl may be running
there). Pause, resume and cancel are state changes in the job store, which a
`trawler crawl` running the job follows within 2 s (jobs/follow.py); a job
resumed while no crawl runs it carries on at the next `trawler crawl --data`.
Creating a job needs the job runner: ``JobControlUnavailable`` once the
request itself has been checked.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from trawler.api.deps import JobControlUnavailable, NoCrawlData, StoreUnavailable
from trawler.api.sqlitereader import SqliteJobReader
from trawler.config import CrawlConfig
from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.layout import REGISTRY_NAME
from trawler.jobs.model import JobInfo, JobState, UnknownJob, check_transition
from trawler.recrawl import RevisitWindow
from trawler.store import sqlite_read
from trawler.store.sqlite import DB_NAME, NotTrawlerData, connect

# The single-job store's words for its states (store/sqlite.py) in the job model's.
_STATES = {
    "seeding": JobState.RUNNING,  # seeds still going in: running, JobInfo.seeding set
    "running": JobState.RUNNING,
    "stopped": JobState.PAUSED,  # a crawl stopped by a signal resumes where it was
    "finished": JobState.FINISHED,
}
T = TypeVar("T")
NO_RUNNER = "this server has no job runner: start crawls with `trawler crawl`"


def job_info(job: sqlite_read.StoredJob, counts: dict[str, float]) -> JobInfo:
    state = _STATES.get(job.state, JobState.FAILED)
    return JobInfo(
        id=job.id, state=state, options=job.config.model_dump(mode="json"),
        created_at=job.created_at, seeding=job.state == "seeding",
        finished_at=job.updated_at if state.ended else None,
        pages_crawled=int(counts["pages_crawled"]), urls_queued=int(counts["urls_queued"]),
        errors=int(counts["errors"]), pages_per_s=counts["pages_per_s"],
    )  # fmt: skip


class DataDirJobs:
    """The jobs of one data directory."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.store = EmbeddedJobStore(data)

    @property
    def _registry(self) -> bool:
        return (self.data / REGISTRY_NAME).exists()

    def _read(self) -> JobInfo | None:
        """The one job of an older data directory (``DATA/trawler.db``)."""
        if not (self.data / DB_NAME).exists():
            return None  # no crawl yet: no job, and nothing wrong
        try:
            return _read_job(self.data)
        except NoCrawlData:  # the crawl is creating its tables
            return None

    def _with_pace(self, info: JobInfo) -> JobInfo:
        """The job's numbers from its own database (none before it has one)."""
        path = self.store.job_dir(info.id)
        if (path / DB_NAME).exists():
            try:
                counts = _counts(path)
            except NoCrawlData:  # its file made a moment ago, its tables not yet
                return info
            info.pages_crawled, info.urls_queued = (
                int(counts["pages_crawled"]),
                int(counts["urls_queued"]),
            )
            info.errors, info.pages_per_s = int(counts["errors"]), counts["pages_per_s"]
        return info

    async def list_jobs(
        self, states: frozenset[JobState] | None, offset: int, limit: int
    ) -> tuple[list[JobInfo], int]:
        if self._registry:
            wanted = sorted(states) if states is not None else None
            jobs, total = await self._store_call(self.store.list(wanted, offset, limit))
            return [await asyncio.to_thread(self._with_pace, job) for job in jobs], total
        job = await asyncio.to_thread(self._read)
        jobs = [job] if job is not None and (states is None or job.state in states) else []
        return jobs[offset : offset + limit], len(jobs)

    async def get_job(self, job_id: str) -> JobInfo:
        if self._registry:
            info = await self._store_call(self.store.get(job_id))
            return await asyncio.to_thread(self._with_pace, info)
        job = await asyncio.to_thread(self._read)
        if job is None or job.id != job_id:
            raise UnknownJob(job_id)
        return job

    async def create_job(self, config: CrawlConfig, seeds: list[str]) -> JobInfo:
        raise JobControlUnavailable(NO_RUNNER)

    async def change_state(self, job_id: str, wanted: JobState) -> JobInfo:
        job = await self.get_job(job_id)
        check_transition(job_id, job.state, wanted)
        if not self._registry:  # an older directory: `trawler crawl` moves it first
            raise JobControlUnavailable(NO_RUNNER)
        await self._store_call(self.store.transition(job_id, wanted, "api"))
        return await self.get_job(job_id)

    async def recrawl_job(self, job_id: str, window: RevisitWindow) -> JobInfo:
        await self.get_job(job_id)  # UnknownJob: 404
        raise JobControlUnavailable(NO_RUNNER)

    def reader(self, job_id: str) -> SqliteJobReader:
        if self._registry:
            path = self.store.job_dir(job_id)
            if not _known(self.data, job_id):
                raise UnknownJob(job_id)
            return SqliteJobReader.open(path, job_id)
        job = self._read()
        if job is None or job.id != job_id:
            raise UnknownJob(job_id)
        return SqliteJobReader.open(self.data, job_id)

    async def check(self) -> None:
        if self._registry:
            await self._store_call(self.store.list(None, 0, 1))
        else:
            await asyncio.to_thread(self._read)

    async def workers(self) -> list[dict]:
        return []  # no runner here: a `trawler crawl` of the directory is not one of ours

    @staticmethod
    async def _store_call(call: Awaitable[T]) -> T:
        try:
            return await call
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot read the job store: {exc}") from None


def _read_job(path: Path) -> JobInfo | None:
    job, counts = _reading(path, lambda conn: (sqlite_read.stored_job(conn),
                                               sqlite_read.job_counts(conn)))  # fmt: skip
    return None if job is None else job_info(job, counts)


def _counts(path: Path) -> dict[str, float]:
    return _reading(path, sqlite_read.job_counts)


def _reading(path: Path, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read`` over the job database in ``path``, read-only; a failing one is a 503."""
    try:
        conn = connect(path, readonly=True)
    except FileNotFoundError as exc:  # no file, or one whose crawl is creating its tables
        raise NoCrawlData(str(exc)) from None
    except (NotTrawlerData, sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(str(exc)) from None
    try:
        return read(conn)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot read {path / DB_NAME}: {exc}") from None
    finally:
        conn.close()


def _known(data: Path, job_id: str) -> bool:
    conn = sqlite3.connect(f"file:{data / REGISTRY_NAME}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is not None
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot read the job store: {exc}") from None
    finally:
        conn.close()
