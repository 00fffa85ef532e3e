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
``Services`` for all its jobs, and each job's data in ``DATA/jobs/<id>/``
(jobs/jobdata.py, as `trawler crawl` keeps it).

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
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from trawler.blocklist import Blocked
from trawler.config import CrawlConfig
from trawler.jobs.controls import follow_controls, sync_controls
from trawler.jobs.embedded import EmbeddedJobStore, open_registry
from trawler.jobs.embedded_controls import EmbeddedControlStore
from trawler.jobs.handover import NoFreeSlot, mark_orphans, one_line, seed_chunks, seed_job
from trawler.jobs.jobdata import job_backend, record_run_end, record_run_start
from trawler.jobs.layout import has_single_job_layout, job_dir, job_numbers, move_single_job_layout
from trawler.jobs.model import (
    InvalidTransition,
    JobEvent,
    JobInfo,
    JobState,
    NotRevisitable,
    check_revisit,
    check_transition,
)
from trawler.jobs.runner import JobRunner
from trawler.jobs.store import DEFAULT_PAGE
from trawler.locks import JobBusy, lock_data_dir, lock_job
from trawler.recrawl import RevisitWindow
from trawler.recrawl_run import RecrawlOptions
from trawler.services import PolitenessSettings, Services

log = logging.getLogger("trawler")
FOLLOW_INTERVAL_S = 0.5
SHUTDOWN = "shutdown"  # a process ending paused the job: the next one resumes it
GONE = "process gone"  # the process running it died: the next one resumes it
RESUMABLE = (SHUTDOWN, GONE)


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
        self._runner: JobRunner | None = None
        self._job_locks: dict[str, BinaryIO] = {}  # the jobs this process runs
        self._configs: dict[str, CrawlConfig] = {}
        self._followers: builtins.list[asyncio.Task[None]] = []
        self._watchers: dict[str, asyncio.Task[None]] = {}  # per job run here: its end
        self._cancels: set[asyncio.Task[None]] = set()
        self._starting = asyncio.Lock()
        self._closing = False

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
        self._runner = JobRunner(self._backend_for, services, self._record)
        await self._sync_controls()
        self._followers = [
            asyncio.create_task(follow_controls(
                self.controls, services, self._apply_politeness, self.follow_interval_s)),
            asyncio.create_task(self._follow_jobs()),
        ]  # fmt: skip
        await mark_orphans(self.store, GONE)
        await self._fill_slots()

    async def close(self) -> None:
        """Running jobs become paused (``shutdown``): the next process resumes them."""
        self._closing = True
        for task in self._followers:
            task.cancel()
        runner = self._runner
        if runner is not None:
            await runner.close()
            if self._watchers:
                await asyncio.wait(self._watchers.values())
            await runner.services.close()
        for lock in self._job_locks.values():
            lock.close()
        self._job_locks.clear()

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
            await seed_job(self.data_dir, job_id, config, chunks, self._open_runner().services)
        except Exception as exc:
            await self.store.transition(job_id, JobState.FAILED, one_line(exc))
            raise
        finally:
            lock.close()
        await self._fill_slots()
        return job_id

    async def info(self, job_id: str) -> JobInfo:
        """The job with its events and live numbers (``UnknownJob``)."""
        info = await self.store.get(job_id)
        running = self._runner.job(job_id) if self.runs(job_id) and self._runner else None
        if running is not None and running.progress is not None:
            info.pages_per_s = running.progress.pages_per_s
        return info

    async def list(
        self, states: Sequence[JobState] | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> tuple[builtins.list[JobInfo], int]:
        return await self.store.list(states, offset, limit)

    def running(self) -> builtins.list[tuple[str, int]]:
        """The jobs this process is crawling now (not paused), with their pages stored."""
        runner = self._open_runner()
        return [(job.id, job.crawler.pages_stored) for job in runner.jobs()
                if job.state is JobState.RUNNING]  # fmt: skip

    def runs(self, job_id: str) -> bool:
        """Whether this process runs the job now (paused here included)."""
        return job_id in self._job_locks

    async def pause(self, job_id: str) -> None:
        if self.runs(job_id):
            await self._open_runner().pause(job_id, "user")
        else:  # pending, or run by another process: it follows the store
            await self.store.transition(job_id, JobState.PAUSED, "user")

    async def resume(self, job_id: str) -> None:
        """Here when nobody runs it (``NoFreeSlot`` when every slot is taken)."""
        if self.runs(job_id):
            await self._open_runner().resume(job_id, "user")
            return
        state = await self.store.state(job_id)
        check_transition(job_id, state, JobState.RUNNING)
        if not await self._start(job_id, explicit=True):  # another process runs it
            await self.store.transition(job_id, JobState.RUNNING, "user")

    async def cancel(self, job_id: str) -> None:
        """Stop for good; what was stored is kept (this waits until it is stored)."""
        if self.runs(job_id):
            await self._open_runner().cancel(job_id, "user")
            watcher = self._watchers.get(job_id)
            if watcher is not None:  # its end recorded, its lock freed
                await asyncio.wait({watcher})
        else:
            await self.store.transition(job_id, JobState.CANCELLED, "user")

    async def recrawl(self, job_id: str, window: RevisitWindow | None = None) -> None:
        """Revisit the job's stored pages once, here (`trawler recrawl --job ID`'s work,
        sharing this process's politeness): the job, finished or cancelled, runs while
        the pass lasts and then goes back to that state. ``window``: the revisit window
        the pass's estimates are clamped to [the job's]. ``NotRevisitable`` (its state,
        no stored page, another process has it), ``NoFreeSlot``, ``UnknownJob``."""
        watcher = self._watchers.get(job_id)
        if watcher is not None and self._open_runner().state(job_id).ended:
            await asyncio.wait({watcher})  # its run just ended here: lock freed, end recorded
        async with self._starting:
            state = await self.store.state(job_id)
            check_revisit(job_id, state)
            if self._closing or self.runs(job_id):
                raise NotRevisitable(job_id, state, "this process is closing or runs it already")
            try:
                await self._run_locked(job_id, partial(self._start_revisits, job_id, window))
            except JobBusy as exc:
                raise NotRevisitable(job_id, state, one_line(exc)) from None

    async def _start_revisits(self, job_id: str, window: RevisitWindow | None) -> None:
        state = await self.store.state(job_id)  # again, under the job's lock
        check_revisit(job_id, state)
        if self._free_slots() == 0:
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
        await self._open_runner().start_revisits(job_id, config, RecrawlOptions(window), state)

    async def wait(self, job_id: str, timeout_s: float | None = None) -> JobState:
        """The job's state once it has ended, or after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            if self.runs(job_id):
                left = None if deadline is None else max(deadline - loop.time(), 0)
                await self._open_runner().wait(job_id, left)
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
    def _open_runner(self) -> JobRunner:
        if self._runner is None:
            raise RuntimeError("LocalJobs is not open")
        return self._runner

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

    def _free_slots(self) -> int | None:
        if self.max_running_jobs is None:
            return None
        busy = sum(1 for job in self._open_runner().jobs() if not job.state.ended)
        return max(self.max_running_jobs - busy, 0)

    async def _fill_slots(self) -> None:
        """Start the jobs waiting (oldest first) while slots are free."""
        if self._closing:
            return
        for job_id, _state in await self.store.startable(RESUMABLE):
            if self._free_slots() == 0:
                return
            if not self.runs(job_id):
                await self._start(job_id, explicit=False)

    async def _start(self, job_id: str, *, explicit: bool) -> bool:
        """Run the job here if nobody does and it may start (``explicit``: a user's
        resume of a paused job); False when another process runs it."""
        async with self._starting:
            if self.runs(job_id) or self._closing:
                return self.runs(job_id)
            try:
                await self._run_locked(job_id, partial(self._start_locked, job_id, explicit))
            except JobBusy:
                return False
            return True

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
        free = self._free_slots()
        if free == 0 and self.max_running_jobs is not None:
            raise NoFreeSlot(job_id, state, self.max_running_jobs)
        config = await self.store.config(job_id)
        stored_pages = (await asyncio.to_thread(job_numbers, job_dir(self.data_dir, job_id)))[0]
        self._configs[job_id] = config
        await self._open_runner().start(job_id, config, (), stored_pages, current=state)

    async def _watch(self, job_id: str) -> None:
        """When the job's run ends: its end recorded, its lock freed, the next job started."""
        runner = self._open_runner()
        state = await runner.wait(job_id)
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
            await self._fill_slots()

    def _watched(self, job_id: str, watcher: asyncio.Task[None]) -> None:
        if self._watchers.get(job_id) is watcher:
            del self._watchers[job_id]

    async def _sync_controls(self) -> None:
        await sync_controls(self.controls, self._open_runner().services, self._apply_politeness)

    def _apply_politeness(self, settings: PolitenessSettings) -> None:
        for crawler in self._open_runner().crawlers():
            crawler.apply_politeness(settings)

    async def _follow_jobs(self) -> None:
        """Jobs run here follow their state set from another process (`trawler jobs
        pause`); jobs waiting start as slots free (also jobs another process made)."""
        while True:
            await asyncio.sleep(self.follow_interval_s)
            try:
                await self._follow_once()
                await self._fill_slots()
            except Exception as exc:  # a busy store: try again next time
                log.debug("cannot follow the jobs: %s", exc)

    async def _follow_once(self) -> None:
        runner = self._open_runner()
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
