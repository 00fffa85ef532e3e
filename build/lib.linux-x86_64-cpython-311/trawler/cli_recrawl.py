"""`trawler recrawl` (revisit stored pages with conditional GET) and `trawler versions`
(a URL's versions, or every page's latest or all versions), issue 15."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    EXIT_SIGNAL_BASE,
    DataOpt,
    check_postgres_url,
    check_redis_url,
    fail,
)
from trawler.recrawl import DEFAULT_REVISIT_MAX_S, DEFAULT_REVISIT_MIN_S, RevisitWindow

RevisitMinOpt = Annotated[
    float,
    typer.Option(
        "--revisit-min", help="Shortest interval between two visits of a page, seconds [3600]."
    ),
]
RevisitMaxOpt = Annotated[float, typer.Option("--revisit-max", help="Longest interval between two visits of a page, seconds [30 days].")]  # fmt: skip


class RevisitPolicy(StrEnum):  # revisit_policy.POLICIES
    optimal = "optimal"
    proportional = "proportional"


def register(app: typer.Typer) -> None:
    app.command()(recrawl)
    app.command()(versions)


def revisit_window(revisit_min: float, revisit_max: float) -> RevisitWindow:
    """The window, or a one-line error (exit 2)."""
    try:
        return RevisitWindow(revisit_min, revisit_max)
    except ValueError as exc:
        fail(str(exc))


def job_window(
    config: Any, min_s: float | None, max_s: float | None, policy: str | None
) -> RevisitWindow:
    """The options given, the job's own settings for the rest (a job crawled with
    --recrawl --revisit-max 600 is recrawled within that), or a one-line error (exit 2)."""
    try:
        return RevisitWindow(
            config.revisit_min_s if min_s is None else min_s,
            config.revisit_max_s if max_s is None else max_s,
            str(config.revisit_policy if policy is None else policy),
        )
    except ValueError as exc:
        fail(
            f"{exc} (the job's own: --revisit-min {config.revisit_min_s:g}, --revisit-max {config.revisit_max_s:g})"
        )


def recrawl(
    data: DataOpt = DEFAULT_DATA,
    job: Annotated[str | None, typer.Option("--job", help="The job whose pages to revisit [the newest job in DATA].")] = None,
    continuous: Annotated[bool, typer.Option("--continuous", help="Keep running: revisit each page when its interval has passed.")] = False,
    revisit_min: Annotated[float | None, typer.Option("--revisit-min", help="Shortest interval between two visits of a page, seconds [the job's: 3600 unless it was crawled with another].")] = None,
    revisit_max: Annotated[float | None, typer.Option("--revisit-max", help="Longest interval between two visits of a page, seconds [the job's: 30 days unless it was crawled with another].")] = None,
    revisit_policy: Annotated[RevisitPolicy | None, typer.Option("--revisit-policy", help="optimal or proportional intervals (see `trawler crawl --help`) [the job's: optimal unless it was crawled with another].")] = None,
    max_seconds: Annotated[float | None, typer.Option("--max-seconds", help="Stop after this many seconds.")] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds between two requests to one host [the job's --delay].")] = None,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="A distributed job: start a pass that the workers carry out (with --redis).")] = None,
    redis: Annotated[str | None, typer.Option("--redis", envvar="TRAWLER_REDIS", callback=check_redis_url, help="The distributed job's Redis (with --postgres).")] = None,
) -> None:  # fmt: skip
    """Revisit the job's stored pages with conditional GET: one pass over every page
    now, or with --continuous each page when due. Changed pages become new versions.
    With --postgres and --redis: a distributed job's pass, run by `trawler worker`s."""
    window = revisit_window(  # the options given checked now, before any data is opened
        DEFAULT_REVISIT_MIN_S if revisit_min is None else revisit_min,
        DEFAULT_REVISIT_MAX_S if revisit_max is None else revisit_max,
    )
    if postgres is not None or redis is not None:
        local = {"--continuous": continuous, "--max-seconds": max_seconds is not None,
                 "--delay": delay is not None,
                 "--revisit-policy": revisit_policy is not None}  # fmt: skip
        _pg_recrawl(postgres, redis, job, window, [name for name, given in local.items() if given])
        return
    if max_seconds is not None and not max_seconds > 0:
        fail("--max-seconds must be > 0")
    if delay is not None and not delay >= 0:
        fail("--delay must be >= 0")
    from trawler import cli_crawljob as cj
    from trawler.jobs.layout import job_dir

    _lock = cj.lock_data(data)
    jobs = cj.open_jobs(data)
    job_id = _pick_job(jobs, data, job)
    _job_lock = cj.lock_job_of(data, job_id)
    config = cj.run(jobs.config(job_id))
    if delay is not None:
        config.delay_s = delay
    window = job_window(config, revisit_min, revisit_max, revisit_policy)
    totals = run_recrawl(job_dir(data, job_id), config, window, continuous, max_seconds)
    typer.echo(f"job {job_id}: {recrawl_summary(totals)}", err=True)


# What a distributed job does instead of each option of a pass run here.
_DISTRIBUTED_INSTEAD = {
    "--continuous": "`trawler submit --recrawl` makes a distributed job continuous",
    "--max-seconds": "a distributed pass runs until each page is revisited (cancel it to stop)",
    "--delay": "the workers keep the job's own --delay",
    "--revisit-policy": "the workers schedule a distributed job's revisits proportionally",
}


def _pg_recrawl(postgres: str | None, redis: str | None, job: str | None,
                window: RevisitWindow, local_options: list[str]) -> None:  # fmt: skip
    """Start a distributed job's pass (the workers carry it out) and return at once."""
    from trawler.cli_common import run_connected
    from trawler.cli_dist import start_recrawl
    from trawler.jobs.model import NotRevisitable, UnknownJob

    if postgres is None:
        fail("--redis needs --postgres: the distributed job's database")
    if redis is None:
        fail("--postgres needs --redis: the frontier the workers share")
    if local_options:
        option = local_options[0]
        fail(f"{option} is for `trawler recrawl --data` only: {_DISTRIBUTED_INSTEAD[option]}")
    try:
        job_id, pages = run_connected(start_recrawl(postgres, redis, job, window))
    except UnknownJob:
        fail(f"no job {job!r} in the database" if job else "no job in the database: submit one")
    except NotRevisitable as exc:
        fail(str(exc), EXIT_FAILED)
    typer.echo(f"job {job_id}: a recrawl pass of {pages} pages, carried out by the workers",
               err=True)  # fmt: skip


def _pick_job(jobs: object, data: Path, job: str | None) -> str:
    from trawler import cli_crawljob as cj
    from trawler.jobs.model import UnknownJob

    if job is not None:
        try:
            return cj.run(jobs.get(job)).id  # type: ignore[attr-defined]
        except UnknownJob:
            fail(f"no job {job!r} in {data}")
    newest, _ = cj.run(jobs.list(None, 0, 1))  # type: ignore[attr-defined]
    if not newest:
        fail(f"no crawl data in {data}: crawl first")
    return str(newest[0].id)


def run_recrawl(
    directory: Path, config: object, window: RevisitWindow, continuous: bool,
    max_seconds: float | None,
) -> object:  # fmt: skip
    """Run the revisits until done (one pass), a signal or max_seconds; a signal that
    stops a continuous run exits 128 + its number after the summary."""
    from trawler.recrawl_run import Recrawler, RecrawlOptions

    options = RecrawlOptions(window, continuous, max_seconds)
    received: list[int] = []

    async def main() -> object:
        recrawler = Recrawler(directory, config, options)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()

        def on_signal(sig: int) -> None:
            received.append(sig)
            recrawler.stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        return await recrawler.run()

    try:
        totals = asyncio.run(main())
    except (OSError, sqlite3.Error) as exc:
        fail(f"cannot revisit the pages in {directory}: {exc}", EXIT_FAILED)
    if received:
        typer.echo(recrawl_summary(totals), err=True)
        raise typer.Exit(EXIT_SIGNAL_BASE + received[0])
    return totals


def recrawl_summary(totals: object) -> str:
    visits = getattr(totals, "visits", {})
    parts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(visits.items()))
    return f"{sum(visits.values())} revisits ({parts or 'none'}), {getattr(totals, 'body_bytes', 0)} body bytes"


def versions(
    url: Annotated[str | None, typer.Argument(help="The URL whose versions to list [every page's].", show_default=False)] = None,
    data: DataOpt = DEFAULT_DATA,
    job: Annotated[str | None, typer.Option("--job", help="The job [the newest job in DATA].")] = None,
    which: Annotated[str, typer.Option("--versions", help="latest, or all.")] = "all",
    text: Annotated[bool, typer.Option("--text/--no-text", help="Include each version's text.")] = False,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="A distributed job's versions, from PostgreSQL (needs --job).")] = None,
) -> None:  # fmt: skip
    """Page versions as JSON lines: a URL's (all, oldest first, by default) or, without
    URL, every revisited page's (--versions latest: the current one; all: history)."""
    from trawler.cli_common import open_crawl_data
    from trawler.store.sqlite import has_table
    from trawler.store.versions import versions_of

    if which not in ("latest", "all"):
        fail(f"--versions must be latest or all, not {which!r}")
    if postgres is not None:
        _pg_versions(postgres, job, url, which == "latest", text)
        return
    conn = open_crawl_data(data, job)
    try:
        if not has_table(conn, "page_versions"):
            return  # a crawl never revisited: no versions beyond its pages
        count = 0
        for row in versions_of(conn, url, which == "latest"):
            if not text:
                row.pop("text")
            sys.stdout.write(json.dumps(row) + "\n")
            count += 1
    except sqlite3.Error as exc:
        fail(f"cannot read crawl data in {data}: {exc}", EXIT_FAILED)
    finally:
        conn.close()
    if url is not None and count == 0:
        fail(f"no versions of {url} in {data} (not stored, or not revisited yet)", EXIT_FAILED)


def _pg_versions(postgres: str, job: str | None, url: str | None, latest: bool,
                 text: bool) -> None:  # fmt: skip
    from trawler.cli_common import run_connected
    from trawler.cli_dist import job_versions

    if job is None:
        fail("--postgres needs --job")
    try:
        count = run_connected(job_versions(postgres, job, url, latest, sys.stdout, text))
    except KeyError:
        fail(f"no job {job!r} in the database")
    if url is not None and count == 0:
        fail(f"no versions of {url} in job {job} (not stored, or not revisited yet)", EXIT_FAILED)
