"""``JobService`` of `trawler serve --data DIR`: the jobs of the data directory,
run in this process by ``LocalJobs`` (jobs/local.py).

Reads are ``DataDirJobs``'s (datadir.py): the registry and each job's database.
Creating a job records it, puts its seeds into its frontier and starts it when
a slot is free (``--max-running-jobs``). Pause, resume and cancel of a job this
process runs go through its runner; of a job another process runs (a `trawler
crawl` of the directory), through the job store, which that process follows.
"""

from __future__ import annotations

import os
import time

from trawler.api.datadir import DataDirJobs
from trawler.config import CrawlConfig
from trawler.jobs.local import LocalJobs
from trawler.jobs.model import JobInfo, JobState
from trawler.recrawl import RevisitWindow


class LocalJobService(DataDirJobs):
    def __init__(self, jobs: LocalJobs) -> None:
        super().__init__(jobs.data_dir)
        self.jobs = jobs
        self.started_at = time.time()

    async def create_job(self, config: CrawlConfig, seeds: list[str]) -> JobInfo:
        job_id = await self._store_call(self.jobs.submit(seeds, config))
        return await self.get_job(job_id)

    async def change_state(self, job_id: str, wanted: JobState) -> JobInfo:
        await self.get_job(job_id)  # UnknownJob: 404
        change = {JobState.PAUSED: self.jobs.pause, JobState.RUNNING: self.jobs.resume,
                  JobState.CANCELLED: self.jobs.cancel}[wanted]  # fmt: skip
        await self._store_call(change(job_id))
        return await self.get_job(job_id)

    async def recrawl_job(self, job_id: str, window: RevisitWindow) -> JobInfo:
        await self._store_call(self.jobs.recrawl(job_id, window))
        return await self.get_job(job_id)

    async def workers(self) -> list[dict]:
        """This process: live while it runs a job not paused."""
        running = self.jobs.running()
        now = time.time()
        return [{
            "id": f"serve-{os.getpid()}", "state": "live" if running else "idle",
            "current_url": None, "pages": sum(pages for _, pages in running),
            "uptime_s": round(now - self.started_at, 3), "last_heartbeat": now,
        }]  # fmt: skip
