"""`trawler jobs list|show|pause|resume|cancel`: the job store from the command line,
on an embedded data directory (``--data``) or on PostgreSQL (``--postgres``).

A running `trawler crawl` or `trawler worker` follows what these set within
2 s (jobs/follow.py). Exit codes: 2 for an unknown job (or bad options), 1
when the job's state does not allow the change (it is finished, say).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    DataOpt,
    check_postgres_url,
    check_redis_url,
    fail,
    run_connected,
)
from trawler.jobs.model import InvalidTransition, JobInfo, JobState, UnknownJob

jobs_app = typer.Typer(
    name="jobs", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="List, show, pause, resume and cancel crawl jobs.",
)  # fmt: skip

PostgresOpt = Annotated[
    str | None,
    typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url,
                 help="PostgreSQL URL: the distributed jobs [the jobs of --data]."),
]  # fmt: skip
JobArg = Annotated[str, typer.Argument(help="The job's id.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app)


def _with_store(data: Path, postgres: str | None, action: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``action(job store)`` on PostgreSQL or on the data directory."""
    if postgres is not None:
        return run_connected(_on_postgres(postgres, action))
    return run_connected(action(_embedded(data)))


async def _on_postgres(url: str, action: Callable[[Any], Awaitable[Any]]) -> Any:
    from trawler.jobs.postgres import PostgresJobStore
    from trawler.store.postgres import PostgresStore

    store = await PostgresStore.connect(url)
    try:
        return await action(PostgresJobStore(store))
    finally:
        await store.close()


def _embedded(data: Path) -> Any:
    """The data directory's jobs; a directory of the single-job layout is moved
    first (which needs its lock: no older `trawler crawl` may be writing it)."""
    from trawler.jobs.embedded import EmbeddedJobStore
    from trawler.jobs.layout import REGISTRY_NAME, has_single_job_layout

    if not (data / REGISTRY_NAME).exists() and not has_single_job_layout(data):
        fail(f"no crawl data in {data} (missing {REGISTRY_NAME})")
    if has_single_job_layout(data):
        from trawler.cli_crawljob import open_jobs
        from trawler.locks import DataDirBusy, lock_data_dir

        try:
            lock = lock_data_dir(data)
        except DataDirBusy as exc:
            fail(str(exc), EXIT_FAILED)
        try:
            open_jobs(data)
        finally:
            lock.close()
    return EmbeddedJobStore(data)


@jobs_app.command("list")
def list_jobs(
    data: DataOpt = DEFAULT_DATA,
    postgres: PostgresOpt = None,
    state: Annotated[list[JobState] | None, typer.Option("--state", help="Only jobs in this state (repeatable).")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Jobs to skip (newest first).")] = 0,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="Jobs to show.")] = 50,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """The jobs, newest first."""
    jobs, total = _changing("", data, postgres, lambda store: store.list(state, offset, limit))
    if as_json:
        typer.echo(json.dumps({"jobs": [_as_json(j) for j in jobs], "total": total}, indent=2))
        return
    typer.echo(f"{'id':<14}{'state':<11}{'created':<21}{'started':<21}finished")
    for info in jobs:
        typer.echo(f"{info.id:<14}{info.state:<11}{_time(info.created_at):<21}"
                   f"{_time(info.started_at):<21}{_time(info.finished_at)}")  # fmt: skip
    typer.echo(f"{len(jobs)} of {total} job(s)", err=True)


@jobs_app.command()
def show(job: JobArg, data: DataOpt = DEFAULT_DATA, postgres: PostgresOpt = None,
         redis: Annotated[str | None, typer.Option("--redis", envvar="TRAWLER_REDIS", callback=check_redis_url, help="Redis URL: the distributed job's URLs queued.")] = None,
         as_json: JsonOpt = False) -> None:  # fmt: skip
    """One job: its state, numbers, options and every change of state."""
    info: JobInfo = _changing(job, data, postgres, lambda store: store.get(job))
    if redis is not None and postgres is not None:
        from trawler.worker import job_work

        info.urls_queued = run_connected(job_work(redis, job))[0]
    if as_json:
        typer.echo(json.dumps(_as_json(info), indent=2))
        return
    typer.echo(f"job {info.id}: {info.state}{' (adding seeds)' if info.seeding else ''}")
    typer.echo(f"  pages crawled {info.pages_crawled}, errors {info.errors},"
               f" URLs queued {info.urls_queued}")  # fmt: skip
    for event in info.events:
        change = f"{event.from_state} -> {event.to_state}" if event.from_state else "created"
        typer.echo(f"  {_time(event.at)}  {change:<22} {event.reason}")
    typer.echo("  options: " + json.dumps(info.options, sort_keys=True))


def _transition_command(name: str, state: JobState, doc: str) -> None:
    def command(job: JobArg, data: DataOpt = DEFAULT_DATA, postgres: PostgresOpt = None) -> None:
        info = _changing(job, data, postgres, lambda store: store.transition(job, state, "user"))
        typer.echo(f"job {info.id} is {info.state}")
        if postgres is None and state is JobState.RUNNING and not _job_running(data, job):
            typer.echo(f"no crawl runs in {data}: `trawler crawl --data {data} --job {job}`"
                       " carries it on", err=True)  # fmt: skip

    command.__doc__ = doc
    jobs_app.command(name)(command)


def _changing(job: str, data: Path, postgres: str | None, action: Any) -> Any:
    try:
        return _with_store(data, postgres, action)
    except UnknownJob:
        fail(f"no job {job!r} in {postgres and 'PostgreSQL' or data}")
    except InvalidTransition as exc:
        fail(str(exc), EXIT_FAILED)
    except sqlite3.Error as exc:
        fail(f"cannot use the jobs of {data}: {exc}", EXIT_FAILED)


_transition_command(
    "pause", JobState.PAUSED, "Pause a job: no new request; those in flight finish and are stored."
)
_transition_command("resume", JobState.RUNNING, "Resume a paused job.")
_transition_command("cancel", JobState.CANCELLED, "Cancel a job for good; what was stored is kept.")  # fmt: skip


def _job_running(data: Path, job_id: str) -> bool:
    """Whether a process runs the job now (a crawl or a server holds its lock)."""
    from trawler.jobs.layout import job_dir
    from trawler.locks import JOB_LOCK_NAME, is_locked

    return is_locked(job_dir(data, job_id) / JOB_LOCK_NAME)


def _as_json(info: JobInfo) -> dict:
    return asdict(info)


def _time(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
