"""``JobService`` over today's data directory: one job, ``DATA/trawler.db``.

It reads what a `trawler crawl` of that directory stored (read-only, so a crawl
may be running there) and steers nothing: creating, pausing, resuming and
cancelling need the job runner, so they raise ``JobControlUnavailable`` once
the request itself has been checked (an unknown job is still 404, a
transition its state forbids still 409).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from trawler.api.deps import JobControlUnavailable, StoreUnavailable
from trawler.api.sqlitereader import SqliteJobReader
from trawler.config import CrawlConfig
from trawler.jobs.model import JobInfo, JobState, UnknownJob, check_transition
from trawler.store import sqlite_read
from trawler.store.sqlite import DB_NAME, NotTrawlerData, connect

# The single-job store's words for its states (store/sqlite.py) in the job model's.
_STATES = {
    "seeding": JobState.RUNNING,  # seeds still going in: running, JobInfo.seeding set
    "running": JobState.RUNNING,
    "stopped": JobState.PAUSED,  # a crawl stopped by a signal resumes where it was
    "finished": JobState.FINISHED,
}
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
    """The job of one data directory of today's layout."""

    def __init__(self, data: Path) -> None:
        self.data = data

    def _read(self) -> JobInfo | None:
        if not (self.data / DB_NAME).exists():
            return None  # no crawl yet: no job, and nothing wrong
        try:
            conn = connect(self.data, readonly=True)
        except (NotTrawlerData, sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(str(exc)) from None
        try:
            job = sqlite_read.stored_job(conn)
            return None if job is None else job_info(job, sqlite_read.job_counts(conn))
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot read {self.data / DB_NAME}: {exc}") from None
        finally:
            conn.close()

    async def list_jobs(
        self, states: frozenset[JobState] | None, offset: int, limit: int
    ) -> tuple[list[JobInfo], int]:
        job = await asyncio.to_thread(self._read)
        jobs = [job] if job is not None and (states is None or job.state in states) else []
        return jobs[offset : offset + limit], len(jobs)

    async def get_job(self, job_id: str) -> JobInfo:
        job = await asyncio.to_thread(self._read)
        if job is None or job.id != job_id:
            raise UnknownJob(job_id)
        return job

    async def create_job(self, config: CrawlConfig, seeds: list[str]) -> JobInfo:
        raise JobControlUnavailable(NO_RUNNER)

    async def change_state(self, job_id: str, wanted: JobState) -> JobInfo:
        job = await self.get_job(job_id)
        check_transition(job_id, job.state, wanted)
        raise JobControlUnavailable(NO_RUNNER)

    def reader(self, job_id: str) -> SqliteJobReader:
        job = self._read()
        if job is None or job.id != job_id:
            raise UnknownJob(job_id)
        return SqliteJobReader.open(self.data, job_id)

    async def check(self) -> None:
        await asyncio.to_thread(self._read)

    async def workers(self) -> list[dict]:
        return []  # no runner here: a `trawler crawl` of the directory is not one of ours
