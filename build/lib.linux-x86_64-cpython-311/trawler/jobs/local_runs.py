"""The runs of one process's ``LocalJobs`` (jobs/local.py): which jobs of the data
directory it runs, when each starts and what is done when it ends.

``LocalRuns`` owns the process's ``JobRunner`` and the jobs on it:

- A run takes the job's lock (locks.lock_job: one runner per job, whichever
  process) and a slot (``max_running_jobs``; None: no limit, 0: none starts).
- Jobs start oldest first as slots free: pending ones, and those a previous
  process left (``RESUMABLE``: paused at its ``shutdown``, or ``process gone``).
- When a run ends, a watcher records the end in the job's database, frees its
  lock and starts the next job waiting.
- The runner's changes of state are recorded in the job store; a state set
  there by another process (`trawler jobs pause`) is applied to the run here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from trawler.config import CrawlConfig
from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.handover import NoFreeSlot, one_line
from trawler.jobs.jobdata import job_backend, record_run_end, record_run_start
from trawler.jobs.layout import job_dir, job_numbers
from trawler.jobs.model import InvalidTransition, JobEvent, JobState, NotRevisitable, check_revisit
from trawler.jobs.runner import JobRunner
from trawler.locks import JobBusy, lock_job
from trawler.recrawl import RevisitWindow
from trawler.recrawl_run import RecrawlOptions
from trawler.services import Services

log = logging.getLogger("trawler")
SHUTDOWN = "shutdown"  # a process ending paused the job: the next one resumes it
GONE = "process gone"  # the process running it died: the next one resumes it
RESUMABLE = (SHUTDOWN, GONE)


class LocalRuns:
    """The jobs one ``LocalJobs`` runs, from its ``open`` to its ``close``."""

    def __init__(
        self,
        data_dir: Path,
        store: EmbeddedJobStore,
        services: Services,
        max_running_jobs: int | None,
    ) -> None:
        self.data_dir = data_dir
        self.store = store
        self.max_running_jobs = max_running_jobs
        self.runner = JobRunner(self._backend_for, services, self._record)
        self.closing = False  # no job starts any more
        self._job_locks: dict[str, BinaryIO] = {}  # the jobs this process runs
        self._configs: dict[str, CrawlConfig] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}  # per job run here: its end
        self._cancels: set[asyncio.Task[None]] = set()
        self._starting = asyncio.Lock()

    def runs(self, job_id: str) -> bool:
        """Whether this process runs the job now (paused here included)."""
        return job_id in self._job_locks

    async def close(self) -> None:
        """Stop every run (running jobs become paused: ``shutdown``) and free the locks."""
        self.closing = True
        await self.runner.close()
        if self._watchers:
            await asyncio.wait(self._watchers.values())
        await self.runner.services.close()
        for lock in self._job_locks.values():
            lock.close()
        self._job_locks.clear()

    async def ended(self, job_id: str) -> None:
        """Wait until the end of the job's run here is recorded and its lock freed."""
        watcher = self._watchers.get(job_id)
        if watcher is not None:
            await asyncio.wait({watcher})

    # -- starting --------------------------------------------------------------------
    def free_slots(self) -> int | None:
        if self.max_running_jobs is None:
            return None
        busy = sum(1 for job in self.runner.jobs() if not job.state.ended)
        return max(self.max_running_jobs - busy, 0)

    async def fill_slots(self) -> None:
        """Start the jobs waiting (oldest first) while slots are free."""
        if self.closing:
            return
        for job_id, _state in await self.store.startable(RESUMABLE):
            if self.free_slots() == 0:
                return
            if not self.runs(job_id):
                await self.start(job_id, explicit=False)

    async def start(self, job_id: str, *, explicit: bool) -> bool:
        """Run the job here if nobody does and it may start (``explicit``: a user's
        resume of a paused job); False when another process runs it."""
        async with self._starting:
            if self.runs(job_id) or self.closing:
                return self.runs(job_id)
            try:
                await self._run_locked(job_id, partial(self._start_locked, job_id, explicit))
            except JobBusy:
                return False
            return True

    async def start_revisits(self, job_id: str, window: RevisitWindow | None) -> None:
        """A revisit pass of the job's stored pages, run here (``LocalJobs.recrawl``)."""
        watcher = self._watchers.get(job_id)
        if watcher is not None and self.runner.state(job_id).ended:
            await asyncio.wait({watcher})  # its run just ended here: lock freed, end recorded
        async with self._starting:
            state = await self.store.state(job_id)
            check_revisit(job_id, state)
            if self.closing or self.runs(job_id):
                raise NotRevisitable(job_id, state, "this process is closing or runs it already")
            try:
                await self._run_locked(job_id, partial(self._revisits_locked, job_id, window))
            except JobBusy as exc:
                raise NotRevisitable(job_id, state, one_line(exc)) from None

    async def _revisits_locked(self, job_id: str, window: RevisitWindow | None) -> None:
        state = await self.store.state(job_id)  # again, under the job's lock
        check_revisit(job_id, state)
        if self.free_slots() == 0:
            raise NoFreeSlot(job_id, state, self.max_running_jobs or 0)
        pages = (await asyncio.to_thread(job_numbers, job_dir(self.data_dir, job_id)))[0]
        if pages == 0:
            raise NotRevisitable(job_id, state, "it stored no page: nothing to revisit")
        config = await self.store.config(job_id)
        if window is None:
            window = RevisitWindow(
                config.revisit_min_s, config.revisit_max_s, config.revisit_policy
            )
        self._configs[job_id] = config
        await self.runner.start_revisits(job_id, config, RecrawlOptions(window), state)

    async def _run_locked(self, job_id: str, start: Callable[[], Awaitable[None]]) -> None:
        """Take the job's lock (``JobBusy``), ``start`` its run, and watch for its end."""
        lock = await asyncio.to_thread(lock_job, job_dir(self.data_dir, job_id), job_id)
        try:
            await start()
        except BaseException:
            lock.close()
            raise
        self._job_locks[job_id] = lock
        watcher = asyncio.create_task(self._watch(job_id))
        self._watchers[job_id] = watcher
        watcher.add_done_callback(partial(self._watched, job_id))

    async def _start_locked(self, job_id: str, explicit: bool) -> None:
        state = await self.store.state(job_id)
        may = await self.store.startable(RESUMABLE, job_id)
        if not may and not (explicit and state in (JobState.PAUSED, JobState.PENDING)):
            raise InvalidTransition(job_id, state, JobState.RUNNING)
        free = self.free_slots()
        if free == 0 and self.max_running_jobs is not None:
            raise NoFreeSlot(job_id, state, self.max_running_jobs)
        config = await self.store.config(job_id)
        stored_pages = (await asyncio.to_thread(job_numbers, job_dir(self.data_dir, job_id)))[0]
        self._configs[job_id] = config
        await self.runner.start(job_id, config, (), stored_pages, current=state)

    # -- the runner's callbacks and a run's end ------------------------------------------
    def _backend_for(self, job_id: str) -> Any:
        """The runner's factory: the job's backend, its run recorded in its database."""
        backend = job_backend(self.data_dir, job_id)
        record_run_start(backend, job_id, self._configs[job_id], "running")
        return backend

    async def _record(self, event: JobEvent) -> None:
        """The runner's changes of state, recorded. One already made through the store
        (`trawler jobs pause` from a shell, followed here) is not made twice."""
        if event.from_state is not None and event.from_state.ended:  # a revisit pass
            await self.store.reopen(event.job_id, event.reason)
            return
        try:
            await self.store.transition(event.job_id, event.to_state, event.reason)
        except InvalidTransition:
            if await self.store.state(event.job_id) is not event.to_state:
                raise

    async def _watch(self, job_id: str) -> None:
        """When the job's run ends: its end recorded, its lock freed, the next job started."""
        state = await self.runner.wait(job_id)
        try:
            await asyncio.to_thread(record_run_end, self.data_dir, job_id,
                                    state is JobState.FINISHED)  # fmt: skip
        except Exception as exc:
            log.error("job %s: cannot record the end of its run: %s", job_id, exc)
        lock = self._job_locks.pop(job_id, None)
        if lock is not None:
            lock.close()
        self._configs.pop(job_id, None)
        with contextlib.suppress(Exception):
            await self.fill_slots()

    def _watched(self, job_id: str, watcher: asyncio.Task[None]) -> None:
        if self._watchers.get(job_id) is watcher:
            del self._watchers[job_id]

    # -- following the job store ---------------------------------------------------------
    async def follow_jobs(self, interval_s: float) -> None:
        """Jobs run here follow their state set from another process (`trawler jobs
        pause`); jobs waiting start as slots free (also jobs another process made)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._follow_once()
                await self.fill_slots()
            except Exception as exc:  # a busy store: try again next time
                log.debug("cannot follow the jobs: %s", exc)

    async def _follow_once(self) -> None:
        runner = self.runner
        for job in runner.jobs():
            if job.state.ended or not self.runs(job.id):
                continue
            wanted = await self.store.state(job.id)
            if wanted is job.state:
                continue
            if wanted is JobState.PAUSED and job.state is JobState.RUNNING:
                await runner.paused_elsewhere(job.id)
            elif wanted is JobState.RUNNING and job.state is JobState.PAUSED:
                await runner.resume(job.id, "user")
            elif wanted.ended:
                _spawn(self._cancels, runner.cancel(job.id, "user"))


def _spawn(tasks: set[asyncio.Task[None]], call: Coroutine[Any, Any, None]) -> None:
    task = asyncio.create_task(call)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
