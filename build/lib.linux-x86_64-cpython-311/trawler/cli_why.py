"""`trawler why URL`: why the crawl fetched a URL or left it out (provenance.py).

Reads the job's data read-only, as the other read commands do: it works while
the crawl runs.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Annotated, Any

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    DataOpt,
    check_postgres_url,
    fail,
    open_crawl_data,
    run_connected,
)

EXIT_UNSEEN = 1  # the URL is not one the crawl met


def register(app: typer.Typer) -> None:
    app.command()(why)


def why(
    url: Annotated[str, typer.Argument(help="The URL, as linked or normalised.")],
    data: DataOpt = DEFAULT_DATA,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="Ask a distributed job in PostgreSQL.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The job's id [the newest job in DATA]; required with --postgres.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:  # fmt: skip
    """Why URL was fetched or skipped: seed, the link and page that led to it, sitemap,
    redirect, canonical; or the scope, robots.txt, trap, budget or blocklist rule."""
    from trawler.provenance import describe

    if postgres is not None and job is None:
        fail("--postgres needs --job")
    if postgres is not None:
        assert job is not None
        try:
            report = run_connected(_from_postgres(postgres, job, url))
        except KeyError:
            fail(f"no job {job!r} in the database")
    else:
        report = _from_data(data, job, url)
    if report is None:
        typer.echo(f"{url}: never seen by this crawl (no page linked to it)", err=True)
        raise typer.Exit(EXIT_UNSEEN)
    typer.echo(json.dumps(report, ensure_ascii=False) if as_json else "\n".join(describe(report)))


def _normalised(url: str, config: Any) -> str:
    from trawler.urls import Normaliser

    normalised = Normaliser(config.tracking_params)(url)
    if normalised is None:
        fail(f"not an http(s) URL: {url!r}")
    return normalised


def _from_data(data: Any, job: str | None, url: str) -> dict | None:
    from trawler.store.sqlite_provenance import provenance
    from trawler.store.sqlite_read import stored_job
    from trawler.urls import host_key

    conn = open_crawl_data(data, job)
    try:
        stored = stored_job(conn)
        if stored is None:
            fail(f"no crawl yet in {data}")
        normalised = _normalised(url, stored.config)
        return provenance(conn, normalised, host_key(normalised), stored.config.max_pages)
    except sqlite3.Error as exc:
        fail(f"cannot read crawl data in {data}: {exc}", EXIT_FAILED)
    finally:
        conn.close()


async def _from_postgres(postgres: str, job_id: str, url: str) -> dict | None:
    """KeyError for an unknown job."""
    import psycopg

    from trawler.store.pg_provenance import provenance
    from trawler.store.postgres import PostgresStore

    store = await PostgresStore.connect(postgres)  # migrated on connect: the table is there
    try:
        config, _state = await store.get_job(job_id)
    finally:
        await store.close()
    normalised = _normalised(url, config)
    with psycopg.connect(postgres, connect_timeout=5) as conn:
        conn.read_only = True
        return provenance(conn, job_id, normalised, config.max_pages)
