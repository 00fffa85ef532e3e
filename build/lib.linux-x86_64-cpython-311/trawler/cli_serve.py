"""`trawler serve`: the REST API on uvicorn (trawler/api/), and the jobs of the data
directory run in this process (jobs/local.py's ``LocalJobs``, opened and closed
in uvicorn's lifespan on its event loop). SIGINT/SIGTERM end the server: running
jobs are paused with the reason ``shutdown`` and the next `trawler serve`
resumes them. ``--max-running-jobs N`` runs at most N at once (the others wait
``pending``; 0: accept jobs, start none).

Listens on 127.0.0.1:8080 unless told otherwise. Every /api/v1 request needs
the bearer token: ``--token``, else ``TRAWLER_TOKEN``, else one made up now and
printed once. A non-loopback address is refused without a token of the user's
own (exit 2): a printed token is for the person at this machine. With
``--redis`` and ``--postgres`` it serves the distributed jobs instead
(cli_servedist.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    DataOpt,
    check_postgres_url,
    check_redis_url,
    fail,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from trawler.api.deps import ApiSettings
    from trawler.jobs.local import LocalJobs

MAX_REQUEST_HEAD_BYTES = 256 * 1024


def register(app: typer.Typer) -> None:
    app.command()(serve)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def serve(
    data: DataOpt = DEFAULT_DATA,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free one).")] = 8080,
    token: Annotated[str | None, typer.Option(envvar="TRAWLER_TOKEN", help="Bearer token of /api/v1 [made up and printed once].", show_default=False)] = None,
    allow_private: Annotated[bool, typer.Option("--allow-private", help="Jobs may ask to fetch loopback/private addresses.")] = False,
    max_running_jobs: Annotated[int | None, typer.Option(min=0, help="Jobs run at once; the others wait pending (0: accept jobs, start none) [no limit].", show_default=False)] = None,
    redis: Annotated[str | None, typer.Option("--redis", envvar="TRAWLER_REDIS", callback=check_redis_url, help="Redis URL: serve the distributed jobs (with --postgres), crawled by `trawler worker`s.")] = None,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="PostgreSQL URL of the distributed jobs (with --redis).")] = None,
) -> None:  # fmt: skip
    """Serve the REST API (/api/v1, /health, /metrics, /openapi.json) and run DATA's jobs,
    or serve the distributed jobs of --redis and --postgres (crawled by `trawler worker`s)."""
    from trawler.api.deps import ApiSettings
    from trawler.api.server import ApiServer

    if token is not None and len(token.strip()) < 8:
        fail("--token must have at least 8 characters")
    if token is None and not is_loopback(host):
        fail(f"refusing to listen on {host} without a token: give --token or TRAWLER_TOKEN")
    if (redis is None) != (postgres is None):
        fail("--redis and --postgres go together (the distributed jobs)")
    if redis is None and data.exists() and not data.is_dir():
        fail(f"--data {data} is not a directory")
    if redis is not None and postgres is not None:
        if max_running_jobs is not None:
            fail("--max-running-jobs is for the jobs this process runs (not with --redis)")
        sock = _bind(host, port)
        from trawler.cli_servedist import serve_distributed

        # A token made up here is printed once both servers answered (serve_distributed).
        settings = ApiSettings((token or secrets.token_urlsafe(24)).strip(), allow_private)
        return serve_distributed(redis, postgres, settings, sock, uvicorn_config, token is None)
    jobs = _local_jobs(Path(data), max_running_jobs)
    sock = _bind(host, port)
    from trawler import gcpolicy

    gcpolicy.tune_for_crawling()  # its jobs crawl in this process
    if token is None:
        token = secrets.token_urlsafe(24)
        typer.echo(f"API token (shown once): {token}", err=True)
    bound = sock.getsockname()
    where = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    listening = f"listening on http://{where}:{bound[1]} (data: {data})"
    app = _app(jobs, ApiSettings(token.strip(), allow_private, renders_here=True), listening)
    ApiServer(uvicorn_config(app, lifespan="on"), app).run(sockets=[sock])


def uvicorn_config(app: Any, lifespan: Literal["on", "off"] = "off") -> Any:
    import uvicorn

    return uvicorn.Config(
        app, log_config=None, access_log=False, lifespan=lifespan, http="h11",
        # A request head may be this long: the longest query the schema allows (an
        # 8,192-character URL, each character percent-encoded UTF-8) fits.
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
    )  # fmt: skip


def _local_jobs(data: Path, max_running_jobs: int | None) -> LocalJobs:
    """The data directory's jobs, checked now: an unusable directory is a one-line
    error before anything listens."""
    from trawler.jobs.layout import LayoutError
    from trawler.jobs.local import LocalJobs
    from trawler.locks import DataDirBusy
    from trawler.store.sqlite import NotTrawlerData

    jobs = LocalJobs(data, max_running_jobs=max_running_jobs)
    try:
        jobs.prepare()
    except DataDirBusy as exc:
        fail(str(exc), EXIT_FAILED)
    except (OSError, sqlite3.Error, NotTrawlerData, LayoutError) as exc:
        fail(f"cannot use data directory {data}: {exc}", EXIT_FAILED)
    return jobs


def _app(jobs: LocalJobs, settings: ApiSettings, listening: str) -> FastAPI:
    """The app; ``listening`` is said once the jobs are open (the socket already
    listens: a request sent earlier waits for it)."""
    from trawler.api.app import create_app
    from trawler.api.local import LocalJobService
    from trawler.api.operators import StoredControls

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await jobs.open()  # resumes what the last process left
        typer.echo(listening, err=True)
        try:
            yield
        finally:
            await jobs.close()  # running jobs paused: `shutdown`

    return create_app(LocalJobService(jobs), settings, StoredControls(jobs), lifespan)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a busy port is a one-line error and
    port 0 tells which port it got."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_FAILED)
    sock.set_inheritable(True)
    return sock
