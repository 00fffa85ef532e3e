"""What every `trawler` command shares: one-line errors, exit codes, option checks.

Exit codes: 0 finished; 1 the data, a file or a server cannot be used; 2 bad
options or input; 128 + N stopped by signal N (130 SIGINT, 143 SIGTERM).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit

import typer
from typer.core import TyperGroup

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SIGNAL_BASE = 128  # + the signal's number, as shells report a death by signal

DataOpt = Annotated[
    Path, typer.Option("--data", envvar="TRAWLER_DATA", help="Crawl data directory.")
]
DEFAULT_DATA = Path("trawler-data")
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster")  # frontier/redis_keys.py


class ReaderGone(Exception):
    """stdout's reader left (`trawler export | head`): not an error."""


class Commands(TyperGroup):
    """The `trawler` group. A closed stdout pipe leaves every command as
    ``ReaderGone``, which click does not turn into exit 1, for ``cli.main``."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise ReaderGone from exc


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One line on stderr, then exit (2: bad usage or options)."""
    typer.echo(f"trawler: error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def check_redis_url(value: str | None) -> str | None:
    """Option callback: a Redis URL, or a bad option (exit 2) before any connection."""
    if value is not None and urlsplit(value).scheme not in REDIS_SCHEMES:
        raise typer.BadParameter(
            f"{value!r} is not a Redis URL (redis://host:6379/0, redis+cluster://host:port)"
        )
    return value


def check_postgres_url(value: str | None) -> str | None:
    """Option callback: a PostgreSQL URL or key=value connection string."""
    if value is None:
        return None
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(value)
    except ProgrammingError as exc:
        raise typer.BadParameter(f"{value!r} is not a PostgreSQL URL: {exc}") from None
    return value


def open_crawl_data(data: Path, job: str | None = None) -> sqlite3.Connection:
    """A job's database in the data directory for reading (``job``'s, else the newest
    job's), or a one-line error."""
    from trawler.jobs.layout import find_job_dir
    from trawler.jobs.model import UnknownJob
    from trawler.store.sqlite import NotTrawlerData, connect

    try:
        return connect(find_job_dir(data, job), readonly=True)
    except FileNotFoundError as exc:
        fail(str(exc))
    except UnknownJob:
        fail(f"no job {job!r} in {data}")
    except (NotTrawlerData, sqlite3.Error) as exc:
        fail(str(exc), EXIT_FAILED)


_SERVICES = {"psycopg": "PostgreSQL", "psycopg_pool": "PostgreSQL", "redis": "Redis"}


def run_connected(coroutine: Any) -> Any:
    """Run a coroutine; a server that cannot be used is a one-line error naming it (exit 1)."""
    try:
        return asyncio.run(coroutine)
    except BrokenPipeError:
        raise  # stdout's reader left: not a server's fault
    except Exception as exc:  # psycopg / redis errors name the server and the cause
        service = _SERVICES.get(type(exc).__module__.split(".")[0])
        if service is not None:
            fail(f"{service}: {exc}", EXIT_FAILED)
        if isinstance(exc, OSError):  # ConnectionError included
            from trawler.store.postgres import PostgresUnavailable

            named = isinstance(exc, PostgresUnavailable)  # says which server and why
            fail(str(exc) if named else f"cannot reach the server: {exc}", EXIT_FAILED)
        raise
