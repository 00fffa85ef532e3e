"""The embedded job service of one data directory: start, watch and stop crawls.

``LocalJobs`` is what `trawler serve --data DIR` runs, and the Python API::

    async with LocalJobs(Path("data")) as jobs:
        job_id = await jobs.submit(["https://example.com/"], CrawlConfig(max_pages=100))
        print(await jobs.info(job_id))          # state, pages_crawled, urls_queued...
        await jobs.pause(job_id)
        await jobs.resume(job_id)
        state = await jobs.wait(job_id, timeout_s=600)  # or: await jobs.cancel(job_id)

It owns the registry ``DATA/jobs.db`` (``EmbeddedJobStore``), the operators'
controls kept there (``EmbeddedControlStore``), one ``JobRunner`` with one
``Services`` for all its jobs (with the jobs' locks, slots and ends:
jobs/local_runs.py), and each job's data in ``DATA/jobs/<id>/`` (jobs/jobdata.py,
as `trawler crawl` keeps it).

- A job runs in one process at a time: whoever holds its lock (locks.lock_job),
  this process or a `trawler crawl`. A job another process runs is steered
  through the store (it follows its state within 0.5 s: jobs/follow.py).
- ``submit``: the job is recorded ``pending`` (its options, never its seeds),
  its seeds go into its own frontier, then it starts when a slot is free
  (``max_running_jobs``; None: no limit, 0: accept jobs and start none).
- Opening resumes what a previous process left: jobs ``running`` whose process
  is gone and jobs paused with the reason ``shutdown``; pending ones start.
  Closing pauses running jobs with the reason ``shutdown``.
- ``recrawl``: a revisit pass of a finished or cancelled job's stored pages (issue
  15), run here under the job's lock and a slot like any run; the job is
  ``running`` while it lasts, then back to the state it had.
- Blocklist and politeness are stored first (so every process crawling the
  directory obeys them: jobs/controls.py), then applied here at once; changes
  made by another process are followed within ``follow_interval_s``.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from trawler.blocklist import Blocked
from trawler.config import CrawlConfig
from trawler.jobs.controls import follow_controls, sync_controls
from trawler.jobs.embedded import EmbeddedJobStore, open_registry
from trawler.jobs.embedded_controls import EmbeddedControlStore
from trawler.jobs.handover import NoFreeSlot as NoFreeSlot  # raised here: the Python API
from trawler.jobs.handover import mark_orphans, one_line, seed_chunks, seed_job
from trawler.jobs.layout import has_single_job_layout, job_dir, move_single_job_layout
from trawler.jobs.local_runs import GONE, LocalRuns
from trawler.jobs.model import JobInfo, JobState, check_transition
from trawler.jobs.store import DEFAULT_PAGE
from trawler.locks import lock_data_dir, lock_job
from trawler.recrawl import RevisitWindow
from trawler.services import PolitenessSettings, Services

FOLLOW_INTERVAL_S = 0.5


class LocalJobs:
    def __init__(
        self,
        data_dir: Path,
        *,
        max_running_jobs: int | None = None,
        services: Callable[[], Services] = Services,
        follow_interval_s: float = FOLLOW_INTERVAL_S,
    ) -> None:
        """``max_running_jobs``: jobs run at once by this process (None: no limit; 0:
        none, jobs stay pending); ``services``: builds the process's ``Services``."""
        self.data_dir = data_dir
        self.store = EmbeddedJobStore(data_dir)
        self.controls = EmbeddedControlStore(data_dir)
        self.max_running_jobs = max_running_jobs
        self.follow_interval_s = follow_interval_s
        self._make_services = services
        self._runs: LocalRuns | None = None  # from open: the runner and its jobs
        self._followers: builtins.list[asyncio.Task[None]] = []

    # -- opening and closing ---------------------------------------------------------
    def prepare(self) -> None:
        """Move an older single-job layout (under the data directory's lock: no
        `trawler crawl` writes it meanwhile) and check the registry. ``DataDirBusy``,
        ``LayoutError``, ``NotTrawlerData``, OSError, sqlite3.Error: called by
        ``open``, or before it for a one-line error."""
        if has_single_job_layout(self.data_dir):
            lock = lock_data_dir(self.data_dir)
            try:
                move_single_job_layout(self.data_dir)
            finally:
                lock.close()
        open_registry(self.data_dir).close()  # it can be created and read

    async def open(self) -> None:
        await asyncio.to_thread(self.prepare)
        await self.store.list(limit=1)  # the registry exists and answers
        services = self._make_services()
        runs = self._runs = LocalRuns(self.data_dir, self.store, services, self.max_running_jobs)
        await self._sync_controls()
        self._followers = [
            asyncio.create_task(follow_controls(
                self.controls, services, self._apply_politeness, self.follow_interval_s)),
            asyncio.create_task(runs.follow_jobs(self.follow_interval_s)),
        ]  # fmt: skip
        await mark_orphans(self.store, GONE)
        await runs.fill_slots()

    async def close(self) -> None:
        """Running jobs become paused (``shutdown``): the next process resumes them."""
        for task in self._followers:
            task.cancel()
        if self._runs is not None:
            await self._runs.close()

    async def __aenter__(self) -> LocalJobs:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- jobs ------------------------------------------------------------------------
    async def submit(self, seeds: Iterable[str], config: CrawlConfig) -> str:
        """A new job: recorded, its seeds (URLs; ValueError for one that is not
        http(s)) put into its frontier, and started when a slot is free. Its id."""
        chunks = seed_chunks(seeds, config)
        job_id = await self.store.create(config, seeding=True)  # no runner starts it yet
        lock = await asyncio.to_thread(lock_job, job_dir(self.data_dir, job_id), job_id)
        try:
            await seed_job(self.data_dir, job_id, config, chunks, self._open().runner.services)
        except Exception as exc:
            await self.store.transition(job_id, JobState.FAILED, one_line(exc))
            raise
        finally:
            lock.close()
        await self._open().fill_slots()
        return job_id

    async def info(self, job_id: str) -> JobInfo:
        """The job with its events and live numbers (``UnknownJob``)."""
        info = await self.store.get(job_id)
        running = self._runs.runner.job(job_id) if self._runs and self.runs(job_id) else None
        if running is not None and running.progress is not None:
            info.pages_per_s = running.progress.pages_per_s
        return info

    async def list(
        self, states: Sequence[JobState] | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> tuple[builtins.list[JobInfo], int]:
        return await self.store.list(states, offset, limit)

    def running(self) -> builtins.list[tuple[str, int]]:
        """The jobs this process is crawling now (not paused), with their pages stored."""
        runner = self._open().runner
        return [(job.id, job.crawler.pages_stored) for job in runner.jobs()
                if job.state is JobState.RUNNING]  # fmt: skip

    def runs(self, job_id: str) -> bool:
        """Whether this process runs the job now (paused here included)."""
        return self._runs is not None and self._runs.runs(job_id)

    async def pause(self, job_id: str) -> None:
        if self.runs(job_id):
            await self._open().runner.pause(job_id, "user")
        else:  # pending, or run by another process: it follows the store
            await self.store.transition(job_id, JobState.PAUSED, "user")

    async def resume(self, job_id: str) -> None:
        """Here when nobody runs it (``NoFreeSlot`` when every slot is taken)."""
        if self.runs(job_id):
            await self._open().runner.resume(job_id, "user")
            return
        state = await self.store.state(job_id)
        check_transition(job_id, state, JobState.RUNNING)
        if not await self._open().start(job_id, explicit=True):  # another process runs it
            await self.store.transition(job_id, JobState.RUNNING, "user")

    async def cancel(self, job_id: str) -> None:
        """Stop for good; what was stored is kept (this waits until it is stored)."""
        if self.runs(job_id):
            await self._open().runner.cancel(job_id, "user")
            await self._open().ended(job_id)  # its end recorded, its lock freed
        else:
            await self.store.transition(job_id, JobState.CANCELLED, "user")

    async def recrawl(self, job_id: str, window: RevisitWindow | None = None) -> None:
        """Revisit the job's stored pages once, here (`trawler recrawl --job ID`'s work,
        sharing this process's politeness): the job, finished or cancelled, runs while
        the pass lasts and then goes back to that state. ``window``: the revisit window
        the pass's estimates are clamped to [the job's]. ``NotRevisitable`` (its state,
        no stored page, another process has it), ``NoFreeSlot``, ``UnknownJob``."""
        await self._open().start_revisits(job_id, window)

    async def wait(self, job_id: str, timeout_s: float | None = None) -> JobState:
        """The job's state once it has ended, or after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            if self.runs(job_id):
                left = None if deadline is None else max(deadline - loop.time(), 0)
                await self._open().runner.wait(job_id, left)
            state = await self.store.state(job_id)
            if state.ended or (deadline is not None and loop.time() >= deadline):
                return state
            await asyncio.sleep(0.1)

    # -- operators' controls (stored first, then applied here) -------------------------
    async def block(self, domain: str, reason: str = "") -> Blocked:
        entry = await self.controls.block(domain, reason)
        await self._sync_controls()
        return entry

    async def unblock(self, domain: str) -> bool:
        found = await self.controls.unblock(domain)
        await self._sync_controls()
        return found

    async def blocklist(self) -> builtins.list[Blocked]:
        return await self.controls.blocklist()

    async def politeness(self) -> PolitenessSettings:
        return await self.controls.politeness()

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings:
        stored = await self.controls.set_politeness(settings)
        await self._sync_controls()
        return stored

    # -- internals -------------------------------------------------------------------
    def _open(self) -> LocalRuns:
        if self._runs is None:
            raise RuntimeError("LocalJobs is not open")
        return self._runs

    async def _sync_controls(self) -> None:
        await sync_controls(self.controls, self._open().runner.services, self._apply_politeness)

    def _apply_politeness(self, settings: PolitenessSettings) -> None:
        for crawler in self._open().runner.crawlers():
            crawler.apply_politeness(settings)
