"""The distributed commands: submit, worker, workers (and export/stats on PostgreSQL).

They share the crawl options with `trawler crawl`: `submit` parses its extra
arguments with the crawl command's own parser, so every option means the
same in both and is declared once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trawler.cli_common import (
    EXIT_SIGNAL_BASE,
    check_postgres_url,
    check_redis_url,
    run_connected,
)

RedisOpt = Annotated[
    str,
    typer.Option(
        "--redis", envvar="TRAWLER_REDIS", callback=check_redis_url,
        help="Redis URL (redis://host:6379/0).",
    ),
]  # fmt: skip
PostgresOpt = Annotated[
    str,
    typer.Option(
        "--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url,
        help="PostgreSQL URL.",
    ),
]  # fmt: skip


def register(app: typer.Typer, fail: Any, cli_settings: Any, read_seeds: Any) -> None:
    """Add the distributed commands to the `trawler` app."""

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def submit(ctx: typer.Context, redis: RedisOpt, postgres: PostgresOpt) -> None:
        """Create a distributed crawl job: trawler submit URL... --redis … --postgres … [crawl options]."""
        from trawler.config import ConfigError, build_config
        from trawler.worker import submit_job

        crawl_command = typer.main.get_command(app).commands["crawl"]  # type: ignore[attr-defined]
        params = crawl_command.make_context("trawler submit", list(ctx.args)).params
        try:
            cfg = build_config(cli_settings(params), params.get("config"))
        except ConfigError as exc:
            fail(str(exc))
        if cfg.priority != "depth":  # the Redis queues are FIFOs (frontier/redis.py)
            fail("--priority importance needs the embedded frontier (trawler crawl)")
        # Every seed is checked (exit 2 naming a bad one) before the job exists.
        with read_seeds(params.get("seeds") or [], params.get("seeds_file"), cfg) as spool:
            if not spool.count:
                fail("no seed URLs given")
            job_id = _connected(fail, submit_job(redis, postgres, cfg, spool))
            typer.echo(f"submitted job with {spool.count} seed(s)", err=True)
        typer.echo(job_id)

    @app.command()
    def worker(
        redis: RedisOpt,
        postgres: PostgresOpt,
        warc_dir: Annotated[Path, typer.Option(help="Directory for this worker's WARC files.")] = Path("warc"),
        exit_when_idle: Annotated[bool, typer.Option("--exit-when-idle", help="Exit 0 once no job has work left.")] = False,
        worker_id: Annotated[str | None, typer.Option(callback=_check_worker_id, help="Name in `trawler workers` and of its WARC files [host-pid].")] = None,
        lease_timeout: Annotated[float, typer.Option(min=1, help="Seconds before a dead worker's URLs are handed out again.")] = 60.0,
        quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    ) -> None:  # fmt: skip
        """Run a worker: crawl the jobs in Redis/PostgreSQL; start as many as wanted, anywhere."""
        import logging

        from trawler import gcpolicy
        from trawler.progress import progress_reporter
        from trawler.store.distributed import default_worker_id
        from trawler.worker import Worker, WorkerOptions

        # The pool logs every failed reconnection, and psycopg a pipeline (executemany)
        # cut by a server shutdown ("error ignored terminating <AsyncPipeline>"): the
        # outage is outage.py's to say, lost and back, once.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        logging.getLogger("psycopg").setLevel(logging.ERROR)
        options = WorkerOptions(redis, postgres, warc_dir, worker_id or default_worker_id(),
                                exit_when_idle, lease_timeout)  # fmt: skip
        gcpolicy.tune_for_crawling()
        with progress_reporter(quiet) as report:
            stop_signal = _connected(fail, _run_worker(Worker(options, report)))
        if stop_signal is not None:
            raise typer.Exit(EXIT_SIGNAL_BASE + stop_signal)  # a stop, not the end

    @app.command()
    def workers(
        redis: RedisOpt,
        as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    ) -> None:
        """Workers seen in the last hour: state (live, idle, gone), job, pages done, host."""
        from dataclasses import asdict

        from trawler.worker import list_workers

        found = _connected(fail, list_workers(redis))
        for status in sorted(found, key=lambda w: w.worker_id):
            typer.echo(json.dumps(asdict(status)) if as_json else _worker_line(status))
        if not found and not as_json:
            typer.echo("no workers")


def _check_worker_id(value: str | None) -> str | None:
    """It names the worker's WARC files and its Redis heartbeat field."""
    if value is not None and (not value or "/" in value or any(c.isspace() for c in value)):
        raise typer.BadParameter(f"{value!r}: a worker id has no spaces or '/'")
    return value


def _worker_line(status: Any) -> str:
    """One `trawler workers` line; a gone worker says since when (UTC)."""
    import time

    if status.gone_since is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(status.gone_since))
        when = f"gone since {since} UTC"
    else:
        when = f"{status.state}  seen {status.age_s:.1f}s ago"
    return (f"{status.worker_id}  {when}  job {status.job_id or '-'}  "
            f"{status.pages_done} pages  host {status.current_host or '-'}")  # fmt: skip


async def _run_worker(worker: Any) -> int | None:
    """Run the worker; returns the number of the signal that stopped it, if one did.
    A second signal cuts the stop short (what is not committed is fetched again, as
    after kill -9); a stop still running after 15 s says what it waits for."""
    from trawler.slowstop import watch_stop

    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    received: list[int] = []
    watching: list[asyncio.Task[None]] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        if len(received) == 1:
            worker.stop()
            watching.append(watch_stop())
        elif main_task is not None:
            main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await worker.run()
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for task in watching:
            task.cancel()
    return received[0] if received else None


def _connected(fail: Any, coroutine: Any) -> Any:
    """Run a coroutine; a server that cannot be used is a one-line error (exit 1)."""
    return run_connected(coroutine)


async def export_job(
    postgres: str, job_id: str, out: Any, fmt: str, include_noindex: bool, kinds: frozenset[str],
    versions: str = "latest", warc_dirs: tuple[Path, ...] = (),
) -> int:  # fmt: skip
    """``versions``: a revisited page's latest version, or all (as export_versions.py);
    ``warc_dirs``: the workers' WARC directories (a WACZ's WARC files)."""
    from trawler.export import open_row_writer, with_text
    from trawler.store import pg_versions
    from trawler.store.sqlite_export import EXPORT_COLUMNS

    store = await _connect_store(postgres)
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
        # Generators closed at once, even when the reader of stdout is gone: their
        # transactions end before the pool closes.
        text = with_text(fmt)
        pages = contextlib.aclosing(store.iter_pages(job_id, include_noindex, kinds=kinds,
                                                     with_text=text))  # fmt: skip
        async with pages as rows, store.pool.connection() as conn:
            columns: tuple[str, ...] = (*EXPORT_COLUMNS, "text") if text else EXPORT_COLUMNS
            if await pg_versions.has_versions(conn, job_id):
                rows = pg_versions.versioned_rows(conn, job_id, rows, versions)
                columns = (*columns, "version")
            writer = open_row_writer(out, fmt, columns, warc_dirs)
            async with contextlib.aclosing(rows):
                async for row in rows:
                    writer.write(row)
            writer.close()
        return writer.count
    finally:
        await store.close()


async def export_attempts_job(postgres: str, job_id: str, out: Any, fmt: str) -> int:
    """`trawler export --attempts --postgres`: the job's fetch log; returns how many rows."""
    from trawler.export import open_row_writer
    from trawler.export_attempts import ATTEMPT_COLUMNS, aiter_attempts

    store = await _connect_store(postgres)
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
        async with store.pool.connection() as conn, conn.transaction():
            writer = open_row_writer(out, fmt, ATTEMPT_COLUMNS)
            async with contextlib.aclosing(aiter_attempts(conn, job_id)) as rows:
                async for row in rows:
                    writer.write(row)
            writer.close()
        return writer.count
    finally:
        await store.close()


async def export_job_graph(postgres: str, job_id: str, out: Any, fmt: str) -> int:
    """`trawler export --graph --postgres`: the job's edges (export_graph.py)."""
    from trawler.export_graph import awrite_edges
    from trawler.store.pg_graph import iter_edges

    store = await _connect_store(postgres)
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
        async with store.pool.connection() as conn, conn.transaction():
            edges = contextlib.aclosing(iter_edges(conn, job_id))
            async with edges as rows:
                return await awrite_edges(rows, out, fmt)
    finally:
        await store.close()


async def export_job_hosts(postgres: str, job_id: str, out: Any, fmt: str) -> int:
    """`trawler export --hosts --postgres`: the job's hosts (export_hosts.py)."""
    from trawler.export import open_row_writer
    from trawler.export_hosts import HOST_COLUMNS, aiter_hosts

    store = await _connect_store(postgres)
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
        writer = open_row_writer(out, fmt, HOST_COLUMNS)
        async with store.pool.connection() as conn, conn.transaction():
            async for row in aiter_hosts(conn, job_id):
                writer.write(row)
        writer.close()
        return writer.count
    finally:
        await store.close()


async def job_versions(
    postgres: str, job_id: str, url: str | None, latest_only: bool, out: Any, text: bool
) -> int:
    """`trawler versions --postgres`: version rows as JSON lines; returns how many."""
    from trawler.store import pg_versions

    store = await _connect_store(postgres)
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
        count = 0
        async with store.pool.connection() as conn:
            async for row in pg_versions.versions_of(conn, job_id, url, latest_only):
                if not text:
                    row.pop("text")
                out.write(json.dumps(row) + "\n")
                count += 1
        return count
    finally:
        await store.close()


async def search_job(
    postgres: str, job_id: str, query: str, limit: int, host: str | None,
    since: float | None, until: float | None, raw: bool,
) -> list[Any]:  # fmt: skip
    """`trawler search --postgres`: the job's best hits (store/pg_search.py); KeyError
    for an unknown job, ValueError for a bad ``raw`` query."""
    import psycopg

    from trawler.store import pg_search

    store = await _connect_store(postgres)  # migrated on connect: the index is there
    try:
        await store.get_job(job_id)  # KeyError for an unknown job
    finally:
        await store.close()
    with psycopg.connect(postgres, connect_timeout=5) as conn:
        conn.read_only = True
        return pg_search.search(conn, job_id, query, limit, host, since, until, raw=raw)


async def start_recrawl(
    postgres: str, redis: str, job_id: str | None, window: Any
) -> tuple[str, int]:
    """`trawler recrawl --postgres --redis`: a pass of the job [the newest] for the
    workers (jobs/postgres_passes.py); (job id, pages due). ``UnknownJob``,
    ``NotRevisitable``."""
    from trawler.jobs.model import UnknownJob
    from trawler.jobs.postgres import PostgresJobStore
    from trawler.jobs.postgres_passes import start_pass

    store = await _connect_store(postgres)
    try:
        if job_id is None:
            newest, _ = await PostgresJobStore(store).list(None, 0, 1)
            if not newest:
                raise UnknownJob("")
            job_id = newest[0].id
        return job_id, await start_pass(store, redis, job_id, window)
    finally:
        await store.close()


async def _connect_store(postgres: str) -> Any:
    from trawler.store.postgres import PostgresStore

    return await PostgresStore.connect(postgres)


async def job_stats(redis: str | None, postgres: str, job_id: str | None) -> dict:
    from trawler.store.postgres import PostgresStore
    from trawler.worker import job_frontier_stats

    store = await PostgresStore.connect(postgres)
    try:
        if job_id is None:
            jobs = await store.list_jobs()
            if not jobs:
                raise KeyError("no jobs")
            job_id = jobs[0].id
        _config, state = await store.get_job(job_id)
        stats = await store.read_stats(job_id)
        stats["job"] = {"id": job_id, "state": state, "seed_hosts": stats["job"]["seed_hosts"]}
        if redis:
            stats.update(await job_frontier_stats(redis, job_id))
        return stats
    finally:
        await store.close()


__all__ = ["export_job", "job_stats", "register", "search_job", "start_recrawl", "sys"]
