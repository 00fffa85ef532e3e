"""`trawler crawl`'s job: which job of the data directory a crawl runs, and its
state in the job store (jobs/) at the start and at the end of the run.

A crawl with seeds and no ``--job`` is a new job; with no seeds it resumes
the newest unfinished job (pending, running or paused); ``--job ID`` picks one.
A run that ends complete leaves the job ``finished``; one stopped by a signal
or a store failure leaves it ``paused`` (the next `trawler crawl` resumes it);
a job cancelled from elsewhere stays ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import typer

from trawler.cli_common import EXIT_FAILED, fail
from trawler.config import CrawlConfig
from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.layout import LayoutError, job_dir, move_single_job_layout
from trawler.jobs.model import InvalidTransition, JobInfo, JobState, UnknownJob
from trawler.jobs.store import UNFINISHED

T = TypeVar("T")


def run(call: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(call)


def lock_data(data: Path) -> BinaryIO:
    """The data directory's lock: one crawl per directory (a `trawler serve` may run
    other jobs beside it: each job has its own lock)."""
    from trawler.locks import DataDirBusy, lock_data_dir

    try:
        return lock_data_dir(data)
    except DataDirBusy as exc:
        fail(str(exc), EXIT_FAILED)
    except OSError as exc:
        fail(f"cannot use data directory {data}: {exc}", EXIT_FAILED)


def lock_job_of(data: Path, job_id: str) -> BinaryIO:
    """The job's lock: no other process (a `trawler serve`, another crawl) runs it."""
    from trawler.locks import JobBusy, lock_job

    try:
        return lock_job(job_dir(data, job_id), job_id)
    except JobBusy as exc:
        fail(f"{exc}: pause or cancel it there, or crawl another job", EXIT_FAILED)
    except OSError as exc:
        fail(f"cannot use data directory {data}: {exc}", EXIT_FAILED)


def lock_picked(
    jobs: EmbeddedJobStore, data: Path, picked: JobInfo | None
) -> tuple[BinaryIO | None, JobInfo | None]:
    """The lock of the job to resume, and the job as it is now that it is ours
    (another process may have run it meanwhile); (None, None) for a new job."""
    if picked is None:
        return None, None
    lock = lock_job_of(data, picked.id)
    picked = run(jobs.get(picked.id))
    if picked.state.ended:
        typer.echo(f"job {picked.id} in {data} is already {picked.state}; nothing to do")
        raise typer.Exit(0)
    return lock, picked


def open_jobs(data: Path) -> EmbeddedJobStore:
    """The data directory's job store, its single-job layout moved first (the
    caller holds the directory's lock)."""
    from trawler.store.sqlite import NotTrawlerData

    try:
        move_single_job_layout(data)
        jobs = EmbeddedJobStore(data)
        run(jobs.list(limit=1))  # the registry can be opened (created) and read
    except (OSError, sqlite3.Error, NotTrawlerData, LayoutError) as exc:
        fail(f"cannot use data directory {data}: {exc}", EXIT_FAILED)
    return jobs


def chosen_job(
    jobs: EmbeddedJobStore, data: Path, job_id: str | None, seeds_given: bool
) -> JobInfo | None:
    """``--job``'s job; else, with no seeds, the newest unfinished one; None: a new job.
    A job that has ended with no seeds to add ends the command (exit 0)."""
    if job_id is not None:
        try:
            picked = run(jobs.get(job_id))
        except UnknownJob:
            fail(f"no job {job_id!r} in {data}")
        if picked.state.ended and seeds_given:
            fail(f"job {job_id} in {data} is {picked.state}: it takes no new seeds;"
                 " crawl them as a new job (without --job)")  # fmt: skip
    elif seeds_given:
        return None
    else:
        unfinished, _ = run(jobs.list(UNFINISHED, 0, 1))
        newest, _ = run(jobs.list(None, 0, 1))
        picked = (unfinished or newest or [None])[0]  # type: ignore[list-item]
        if picked is None:
            fail("no seed URLs given (arguments, --seeds-file or --config)")
    if picked.state.ended:
        typer.echo(f"job {picked.id} in {data} is already {picked.state}; nothing to do")
        raise typer.Exit(0)
    return picked


def stored_config(jobs: EmbeddedJobStore, picked: JobInfo | None) -> CrawlConfig | None:
    return run(jobs.config(picked.id)) if picked is not None else None


def begin(jobs: EmbeddedJobStore, picked: JobInfo | None, cfg: CrawlConfig, seeds: int) -> str:
    """The job's id, running, with this run's options."""
    if picked is None:
        job_id = run(jobs.create(cfg, seeding=True))
    else:
        job_id = picked.id
        run(jobs.set_config(job_id, cfg))
        if seeds:
            run(jobs.set_seeding(job_id, True))
    state = run(jobs.state(job_id))
    if state is not JobState.RUNNING:  # running: a run killed before (its lock is ours now)
        run(jobs.transition(job_id, JobState.RUNNING,
                            "started" if state is JobState.PENDING else "resumed"))  # fmt: skip
    return job_id


def end(jobs: EmbeddedJobStore, job_id: str, complete: bool, reason: str) -> JobState:
    """Finished when complete, else paused (resumable); a state set from elsewhere
    meanwhile (cancelled, paused) stands. The job's state now."""
    state = JobState.FINISHED if complete else JobState.PAUSED
    with contextlib.suppress(InvalidTransition):
        return run(jobs.transition(job_id, state, reason)).state
    return run(jobs.state(job_id))
