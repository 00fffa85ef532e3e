"""Many crawl jobs at once in one process: start, pause, resume, cancel.

Each job is a ``Crawler`` run as an asyncio task over the backend a factory
gives for the job's id (so the runner knows nothing of where a job keeps its
data), and every crawler shares the runner's ``Services``: the host table
(politeness per host across the jobs), the HTTP connection pools, the
robots.txt cache.

- ``pause``: the job's crawler starts no new request; requests in flight finish
  and are committed. Its frontier and store stay open, so ``resume`` carries on
  with nothing lost or fetched twice.
- ``cancel``: the crawler stops (in-flight requests finish within its grace)
  and its store is closed; what was stored is kept.
- ``close`` (the process is ending): running jobs become ``paused``, to be
  resumed by the next process; their crawlers stop as ``cancel``'s do.
- ``start_revisits``: a revisit pass of a finished or cancelled job's stored pages
  (issue 15); the job runs while it lasts, then goes back to the state it had.

Operators' controls act on every job at once, live: ``set_politeness`` (delay,
Crawl-delay ceiling, requests in flight over all jobs; services.py) and the
domain blocklist (``block``/``unblock``: no further request to a blocked domain;
its queued URLs are skipped with the reason ``blocklist``, its new links dropped).

Every change of state is checked against the job model (jobs/model.py) and
handed to ``on_event`` (the job store records it there) before it takes effect.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from trawler.blocklist import Blocked
from trawler.config import CrawlConfig
from trawler.engine import Crawler
from trawler.jobs.model import (
    InvalidTransition,
    JobEvent,
    JobState,
    NotRevisitable,
    UnknownJob,
    check_revisit,
    check_transition,
)
from trawler.records import Progress
from trawler.recrawl_run import RecrawlOptions, revisit_crawler
from trawler.services import PolitenessSettings, Services
from trawler.store.base import Backend

log = logging.getLogger("trawler")

BackendFactory = Callable[[str], Backend]  # job id -> a backend for that job's data
EventSink = Callable[[JobEvent], Awaitable[None] | None]
Check = Callable[[str, JobState, JobState], None]  # raises InvalidTransition
REVISIT_PASS = "recrawl"  # the reason of a revisit pass's start (its event)
REVISIT_PASS_DONE = "recrawl done"  # ... and of its end, every page revisited


@dataclass(slots=True)
class RunningJob:
    """A job this runner has started, and what became of it."""

    id: str
    crawler: Crawler
    state: JobState = JobState.PENDING
    task: asyncio.Task[None] | None = None
    progress: Progress | None = None  # the crawler's last report (every second)
    events: list[JobEvent] = field(default_factory=list)
    # A revisit pass: the state (finished, cancelled) the job goes back to after it.
    after: JobState | None = None


class JobRunner:
    def __init__(
        self,
        backend_for: BackendFactory,
        services: Services | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        """``services``: None builds them for this runner (closed by ``close``)."""
        self.backend_for = backend_for
        self._own_services = services is None
        self.services = services if services is not None else Services()
        self.on_event = on_event
        self._jobs: dict[str, RunningJob] = {}

    # -- control --------------------------------------------------------------------
    async def start(
        self,
        job_id: str,
        config: CrawlConfig,
        seeds: Iterable[Sequence[str]] = (),
        stored_pages: int = 0,
        current: JobState = JobState.PENDING,
    ) -> None:
        """Run the job: ``seeds`` are chunks of normalised URLs to add (none on a
        resume), ``stored_pages`` the pages it stored before (for --max-pages),
        ``current`` its state as its store has it (paused: a job resumed by a new
        process, recorded as paused → running)."""
        self._check_not_running(job_id)
        check_transition(job_id, current, JobState.RUNNING)  # before its backend is opened
        crawler = Crawler(config, self.backend_for(job_id), seeds=seeds, services=self.services)
        job = RunningJob(job_id, crawler, current)
        crawler.on_progress = partial(_keep_progress, job)
        await self._transition(job, JobState.RUNNING, "start")
        self._jobs[job_id] = job
        job.task = asyncio.create_task(self._run(job, stored_pages), name=f"job-{job_id}")

    async def start_revisits(
        self, job_id: str, config: CrawlConfig, options: RecrawlOptions, current: JobState
    ) -> None:
        """A revisit pass of the job's stored pages (`trawler recrawl`'s work, over this
        runner's services): the job, finished or cancelled (``current``), runs until
        every page has been revisited once, then goes back to ``current``. A pass is
        not paused (``NotRevisitable``): cancel ends it (the job is then cancelled);
        ``close`` abandons it, the job back to ``current``, not resumed later."""
        self._check_not_running(job_id)
        check_revisit(job_id, current)  # before its backend is opened
        crawler = revisit_crawler(config, self.backend_for(job_id), options, self.services)
        job = RunningJob(job_id, crawler, current, after=current)
        crawler.on_progress = partial(_keep_progress, job)
        await self._transition(job, JobState.RUNNING, REVISIT_PASS, check=_reopen)
        self._jobs[job_id] = job
        job.task = asyncio.create_task(self._run(job, 0), name=f"job-{job_id}-revisits")

    async def pause(self, job_id: str, reason: str = "user") -> None:
        job = self._job(job_id)
        if job.after is not None and job.state is JobState.RUNNING:
            raise NotRevisitable(job_id, job.state, "a recrawl pass is not paused: cancel it")
        await self._transition(job, JobState.PAUSED, reason)
        job.crawler.pause()

    async def paused_elsewhere(self, job_id: str) -> None:
        """The job store says paused (`trawler jobs pause` from a shell): a crawl
        pauses; a pass, which is not paused, stops there, the job left paused."""
        job = self._job(job_id)
        await self._transition(job, JobState.PAUSED, "user")
        if job.after is None:
            job.crawler.pause()
        else:
            job.crawler.stop()

    async def resume(self, job_id: str, reason: str = "user") -> None:
        job = self._job(job_id)
        await self._transition(job, JobState.RUNNING, reason)
        job.crawler.resume()

    async def cancel(self, job_id: str, reason: str = "user") -> None:
        """Stop the job for good and wait until what it fetched is stored."""
        job = self._job(job_id)
        await self._transition(job, JobState.CANCELLED, reason)
        job.crawler.stop()
        await self.wait(job_id)

    async def wait(self, job_id: str, timeout_s: float | None = None) -> JobState:
        """The job's state once its crawl has ended (or after ``timeout_s``)."""
        job = self._job(job_id)
        if job.task is not None:
            await asyncio.wait({job.task}, timeout=timeout_s)
        return job.state

    async def close(self) -> None:
        """Stop every job (running ones become paused, to be resumed later; a running
        pass goes back to the state it started from: it is not resumed)."""
        for job in self._jobs.values():
            if job.state.ended:
                continue
            if job.state is JobState.RUNNING:  # a pass is abandoned, not resumed later
                await self._transition(job, job.after or JobState.PAUSED, "shutdown")
            job.crawler.stop()
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        if self._own_services:
            await self.services.close()

    # -- operators' controls, over all jobs -----------------------------------------
    @property
    def politeness(self) -> PolitenessSettings:
        return self.services.politeness

    def set_politeness(self, settings: PolitenessSettings) -> None:
        """Apply at once to every job not ended (and to jobs started later)."""
        services = self.services
        services.politeness = settings
        services.throttle.resize(settings.concurrency)
        services.hosts.forget_times()  # each job notes its hosts' times under the new rules
        for crawler in self.crawlers():
            crawler.apply_politeness(settings)

    def block(self, domain: str, reason: str = "") -> Blocked:
        """No job sends another request to ``domain`` or its subdomains (ValueError
        for a name that is not a domain)."""
        return self.services.blocklist.add(domain, reason)

    def unblock(self, domain: str) -> bool:
        """False when ``domain`` was not blocked."""
        return self.services.blocklist.remove(domain)

    def blocklist(self) -> list[Blocked]:
        return self.services.blocklist.entries()

    # -- reading --------------------------------------------------------------------
    def state(self, job_id: str) -> JobState:
        return self._job(job_id).state

    def job(self, job_id: str) -> RunningJob:
        return self._job(job_id)

    def jobs(self) -> list[RunningJob]:
        return list(self._jobs.values())

    def crawlers(self) -> list[Crawler]:
        """The crawlers of the jobs not ended (live settings are applied to these)."""
        return [job.crawler for job in self._jobs.values() if not job.state.ended]

    # -- internals ------------------------------------------------------------------
    def _check_not_running(self, job_id: str) -> None:
        """A job starts again once its crawler has ended (a pass stopped by a pause
        from elsewhere has, though the job is paused, not ended)."""
        old = self._jobs.get(job_id)
        if old is not None and old.task is not None and not old.task.done():
            raise InvalidTransition(job_id, old.state, JobState.RUNNING)

    def _job(self, job_id: str) -> RunningJob:
        job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJob(job_id)
        return job

    async def _transition(
        self, job: RunningJob, state: JobState, reason: str, check: Check = check_transition
    ) -> None:
        """Check, record (``on_event``), then apply: a change not recorded does not happen."""
        check(job.id, job.state, state)
        event = JobEvent(job.id, job.state, state, time.time(), reason)
        if self.on_event is not None:
            recorded = self.on_event(event)
            if inspect.isawaitable(recorded):
                await recorded
        job.events.append(event)
        job.state = state

    async def _run(self, job: RunningJob, stored_pages: int) -> None:
        try:
            complete = await job.crawler.run(stored_pages)
        except Exception as exc:  # the job fails, never the runner
            log.error("job %s failed: %s", job.id, exc)
            await self._end(job, JobState.FAILED, " ".join(f"{type(exc).__name__}: {exc}".split()))
            return
        if complete and job.after is not None:
            if job.state is JobState.RUNNING:  # not stopped by a pause from elsewhere
                await self._end(job, job.after, REVISIT_PASS_DONE)
        elif complete:
            await self._end(job, JobState.FINISHED, "complete")

    async def _end(self, job: RunningJob, state: JobState, reason: str) -> None:
        if job.state.ended:  # cancelled meanwhile: that is what it is
            return
        try:
            await self._transition(job, state, reason)
        except Exception as exc:  # the store cannot record it: the job stays as it was
            log.error("cannot record that job %s is %s: %s", job.id, state, exc)


def _reopen(job_id: str, current: JobState, wanted: JobState) -> None:
    """A revisit pass's start: an ended job may run again (jobs/model.py)."""
    check_revisit(job_id, current)


def _keep_progress(job: RunningJob, progress: Progress) -> None:
    job.progress = progress
