"""The read-side commands: export, stats, search.

They never write to the data directory: they open its database read-only, so
they work while a crawl runs there (the crawl holds the directory's lock,
readers do not need it).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TextIO

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    DataOpt,
    check_postgres_url,
    check_redis_url,
    fail,
    open_crawl_data,
    run_connected,
)


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"
    wacz = "wacz"


# Formats that are no text stream: written to a file only (--output).
FILE_FORMATS = (ExportFormat.parquet, ExportFormat.wacz)


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command()(stats)
    app.command()(search)


def export(
    data: DataOpt = DEFAULT_DATA,
    format: Annotated[ExportFormat, typer.Option("--format", help="jsonl, csv, parquet (typed columns, page text too; also of --graph) or wacz (the job's WARCs, indexed, with a pages list); parquet and wacz need --output.")] = ExportFormat.jsonl,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write, complete or not at all (default: stdout).")] = None,
    include_noindex: Annotated[bool, typer.Option(help="Also export pages marked noindex.")] = False,
    kind: Annotated[str, typer.Option("--kind", help="Rows of these kinds, comma-separated: page, sitemap, robots (a row per robots.txt fetch), or all.")] = "page,sitemap",
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="Export a distributed job from PostgreSQL.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The job's id [the newest job in DATA]; required with --postgres.")] = None,
    versions: Annotated[str, typer.Option("--versions", help="Of a revisited page (trawler recrawl, --recrawl): its latest version, or all (a row each).")] = "latest",
    attempts: Annotated[bool, typer.Option("--attempts", help="Export the fetch log instead: a row per fetch attempt, retries included (url, attempt, started_at, duration_s, status, error, decision).")] = False,
    warc_dir: Annotated[list[Path] | None, typer.Option("--warc-dir", help="--format wacz: where the job's WARC files are (repeat for each worker's); required with --postgres [the job's warc/ in DATA].")] = None,
    graph: Annotated[bool, typer.Option("--graph", help="The link graph instead: a row per link (from_url, to_url, anchor, rel, reason).")] = False,
    hosts: Annotated[bool, typer.Option("--hosts", help="A row per host instead: pages, robots.txt status, AI crawlers' robots.txt groups, tdmrep.json and its reservation of /.")] = False,
) -> None:  # fmt: skip
    """Write one row per fetched URL (streaming) as JSON lines, CSV or Parquet; `kind`
    says what it is. Or package the job's WARC files as a WACZ (--format wacz)."""
    from trawler.cli_dist import export_job
    from trawler.export import write_export
    from trawler.store.kinds import parse_kinds

    if postgres is not None and job is None:
        fail("--postgres needs --job")
    if graph and hosts:
        fail("--graph and --hosts are two exports: give one")
    if graph or hosts:
        _check_graph_options(format, output, attempts, warc_dir, "--hosts" if hosts else "--graph")
        (_export_hosts if hosts else _export_graph)(data, format.value, output, postgres, job)
        return
    if versions not in ("latest", "all"):
        fail(f"--versions must be latest or all, not {versions!r}")
    try:
        kinds = parse_kinds(kind)
    except ValueError as exc:
        fail(str(exc))
    _check_format(format, output, kinds, include_noindex, versions, warc_dir, postgres)
    if attempts:
        _export_attempts(data, format, output, postgres, job, kinds, include_noindex, versions)
        return
    if format is ExportFormat.wacz:  # the whole job: every row names a WARC file
        kinds, include_noindex, versions = parse_kinds("all"), True, "all"
    conn = open_crawl_data(data, job) if postgres is None else None
    warc_dirs = tuple(warc_dir or ())
    if format is ExportFormat.wacz and conn is not None and not warc_dirs:
        warc_dirs = (_job_dir(data, job) / "warc",)  # the embedded job's (jobs/layout.py)
    try:
        with _output(output) as out:
            if conn is not None:
                count = write_export(conn, out, format.value, include_noindex, kinds, versions,
                                     warc_dirs=warc_dirs)  # fmt: skip
            else:
                assert postgres is not None and job is not None
                export = export_job(postgres, job, out, format.value, include_noindex, kinds,
                                    versions, warc_dirs)  # fmt: skip
                count = run_connected(export)
    except Exception as exc:
        _export_failed(exc, data, job, output)
    finally:
        if conn is not None:
            conn.close()
    if output:
        what = "pages listed in" if format is ExportFormat.wacz else "rows written to"
        typer.echo(f"{count} {what} {output}", err=True)


def _export_failed(exc: Exception, data: Path, job: str | None, output: Path | None) -> NoReturn:
    """An export's error as one line (or re-raised when it is no error of ours)."""
    if isinstance(exc, FileNotFoundError):  # a WARC file the job's rows name (wacz)
        fail(str(exc), EXIT_FAILED)
    if isinstance(exc, KeyError):
        fail(f"no job {job!r} in the database")
    if isinstance(exc, sqlite3.Error):
        fail(f"cannot read crawl data in {data}: {exc}", EXIT_FAILED)
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        fail(f"cannot write {output or 'stdout'}: {exc.strerror or exc}", EXIT_FAILED)
    raise exc  # the reader of stdout left (cli.main ends quietly), or a bug


def _check_graph_options(
    format: ExportFormat, output: Path | None, attempts: bool, warc_dir: list[Path] | None,
    option: str = "--graph",
) -> None:  # fmt: skip
    """`--graph` (edges) and `--hosts` write rows: jsonl, csv or parquet (a file, as
    for pages)."""
    if format is ExportFormat.wacz or attempts or warc_dir:
        what = "the link graph" if option == "--graph" else "a row per host"
        fail(f"{option} exports {what}: not with --format wacz, --attempts or --warc-dir")
    if format in FILE_FORMATS and output is None:
        fail(f"--format {format.value} writes a file: give --output FILE")


def _check_format(
    format: ExportFormat, output: Path | None, kinds: frozenset[str], include_noindex: bool,
    versions: str, warc_dir: list[Path] | None, postgres: str | None,
) -> None:  # fmt: skip
    """Bad combinations of export options: one line, exit 2."""
    from trawler.store.kinds import DEFAULT_EXPORT_KINDS

    if format in FILE_FORMATS and output is None:
        fail(f"--format {format.value} writes a file: give --output FILE")
    if format is not ExportFormat.wacz:
        if warc_dir:
            fail("--warc-dir goes with --format wacz")
        return
    if kinds != DEFAULT_EXPORT_KINDS or include_noindex or versions != "latest":
        fail("--format wacz packages the whole job: --kind, --include-noindex and"
             " --versions do not apply")  # fmt: skip
    if postgres is not None and not warc_dir:
        fail("--format wacz with --postgres needs --warc-dir (the workers' WARC directories)")


def _export_attempts(
    data: Path, format: ExportFormat, output: Path | None, postgres: str | None,
    job: str | None, kinds: frozenset[str], include_noindex: bool, versions: str,
) -> None:  # fmt: skip
    """`export --attempts`: the fetch log, in any row format."""
    from trawler.cli_dist import export_attempts_job
    from trawler.export_attempts import write_attempts
    from trawler.store.kinds import DEFAULT_EXPORT_KINDS

    if format is ExportFormat.wacz:
        fail("--attempts exports rows: not --format wacz")
    if kinds != DEFAULT_EXPORT_KINDS or include_noindex or versions != "latest":
        fail("--attempts exports the fetch log: --kind, --include-noindex and --versions"
             " do not apply")  # fmt: skip
    _write_rows(
        data, job, postgres, output, "rows",
        lambda conn, out: write_attempts(conn, out, format.value),
        lambda pg, job_id, out: export_attempts_job(pg, job_id, out, format.value),
    )  # fmt: skip


def _job_dir(data: Path, job: str | None) -> Path:
    from trawler.jobs.layout import find_job_dir

    return find_job_dir(data, job)  # found already by open_crawl_data


def _export_graph(
    data: Path, fmt: str, output: Path | None, postgres: str | None, job: str | None
) -> None:
    """`trawler export --graph`: the edge list (export_graph.py)."""
    from trawler.cli_dist import export_job_graph
    from trawler.export_graph import write_edges
    from trawler.store.sqlite_graph import iter_edges

    _write_rows(
        data, job, postgres, output, "edges",
        lambda conn, out: write_edges(iter_edges(conn), out, fmt),
        lambda pg, job_id, out: export_job_graph(pg, job_id, out, fmt),
    )  # fmt: skip


def _export_hosts(
    data: Path, fmt: str, output: Path | None, postgres: str | None, job: str | None
) -> None:
    """`trawler export --hosts`: reuse reservations per host (export_hosts.py)."""
    from trawler.cli_dist import export_job_hosts
    from trawler.export_hosts import write_hosts

    _write_rows(
        data, job, postgres, output, "hosts",
        lambda conn, out: write_hosts(conn, out, fmt),
        lambda pg, job_id, out: export_job_hosts(pg, job_id, out, fmt),
    )  # fmt: skip


def _write_rows(
    data: Path, job: str | None, postgres: str | None, output: Path | None, noun: str,
    embedded: Callable[[sqlite3.Connection, TextIO], int],
    distributed: Callable[[str, str, TextIO], Awaitable[int]],
) -> None:  # fmt: skip
    """One export of `--attempts` or `--graph`: from the data directory or PostgreSQL,
    to stdout or a file written whole; errors as one line (``_export_failed``)."""
    conn = open_crawl_data(data, job) if postgres is None else None
    try:
        with _output(output) as out:
            if conn is not None:
                count = embedded(conn, out)
            else:
                assert postgres is not None and job is not None
                count = run_connected(distributed(postgres, job, out))
    except Exception as exc:
        _export_failed(exc, data, job, output)
    finally:
        if conn is not None:
            conn.close()
    if output:
        typer.echo(f"{count} {noun} written to {output}", err=True)


@contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    """stdout, or ``path`` written whole or not at all."""
    from trawler.export import AtomicTextFile

    if path is None:
        yield sys.stdout  # a closed pipe (`| head`) ends quietly: see cli.main
        return
    try:
        target = AtomicTextFile(path)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}", EXIT_FAILED)
    try:
        yield target.file
        target.commit()
    except BaseException:
        target.discard()
        raise


def stats(
    data: DataOpt = DEFAULT_DATA,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    redis: Annotated[str | None, typer.Option("--redis", envvar="TRAWLER_REDIS", callback=check_redis_url, help="Redis URL (distributed job's frontier).")] = None,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="PostgreSQL URL (distributed job).")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The job's id [the newest].")] = None,
) -> None:  # fmt: skip
    """Counts of a crawl: pages, statuses, errors, skipped URLs by reason."""
    from trawler.cli_dist import job_stats
    from trawler.progress import print_stats
    from trawler.store.sqlite_export import read_stats

    if postgres is not None:
        try:
            numbers = run_connected(job_stats(redis, postgres, job))
        except KeyError as exc:
            fail(f"no such job: {exc.args[0]}" if job else "no job in the database")
    else:
        conn = open_crawl_data(data, job)
        try:
            numbers = read_stats(conn)
            _registry_state(data, numbers)
        except sqlite3.Error as exc:
            fail(f"cannot read crawl data in {data}: {exc}", EXIT_FAILED)
        finally:
            conn.close()
    if as_json:
        typer.echo(json.dumps(numbers, indent=2))
    else:
        print_stats(numbers)


def _registry_state(data: Path, numbers: dict) -> None:
    """The job's state and times as the job store keeps them (jobs/): the job's own
    database says only whether its last run stopped or finished."""
    import asyncio

    from trawler.jobs.embedded import EmbeddedJobStore
    from trawler.jobs.layout import REGISTRY_NAME
    from trawler.jobs.model import UnknownJob

    job = numbers.get("job")
    if job is None or not (data / REGISTRY_NAME).exists():
        return  # a data directory of the single-job layout, read where it is
    try:
        info = asyncio.run(EmbeddedJobStore(data).get(job["id"]))
    except UnknownJob:
        return
    job.update(state=info.state.value, created_at=info.created_at,
               started_at=info.started_at, finished_at=info.finished_at)  # fmt: skip


def search(
    query: Annotated[str, typer.Argument(help='Words (AND), "phrases", -excluded, prefix*.')],
    data: DataOpt = DEFAULT_DATA,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="Results to show.")] = 10,
    host: Annotated[str | None, typer.Option(help="Only pages of this host (host[:port]).")] = None,
    since: Annotated[str | None, typer.Option(help="Fetched at or after this date (ISO 8601).")] = None,
    until: Annotated[str | None, typer.Option(help="Fetched before this date (ISO 8601).")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Take the query as SQLite FTS5 syntax (with --postgres: PostgreSQL's to_tsquery syntax).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    postgres: Annotated[str | None, typer.Option("--postgres", envvar="TRAWLER_POSTGRES", callback=check_postgres_url, help="Search a distributed job in PostgreSQL.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The job's id [the newest job in DATA]; required with --postgres.")] = None,
) -> None:  # fmt: skip
    """Full-text search of the crawled pages (best match first; noindex and duplicates left out)."""
    from trawler.progress import print_hits

    if postgres is not None and job is None:
        fail("--postgres needs --job")
    window = _epoch(since, "--since"), _epoch(until, "--until")
    if postgres is not None:
        assert job is not None
        hits = _search_postgres(postgres, job, query, limit, host, window, raw)
    else:
        hits = _search_data(data, job, query, limit, host, window, raw)
    if as_json:
        for hit in hits:
            typer.echo(json.dumps(asdict(hit), ensure_ascii=False))
    else:
        print_hits(hits)


def _search_data(
    data: Path, job: str | None, query: str, limit: int, host: str | None,
    window: tuple[float | None, float | None], raw: bool,
) -> list[Any]:  # fmt: skip
    from trawler.store.search import SearchIndexMissing
    from trawler.store.search import search as run_search

    conn = open_crawl_data(data, job)
    try:
        return run_search(conn, query, limit, host, *window, raw=raw)
    except (SearchIndexMissing, ValueError) as exc:
        fail(str(exc))
    except sqlite3.Error as exc:
        fail(f"cannot read crawl data in {data}: {exc}", EXIT_FAILED)
    finally:
        conn.close()


def _search_postgres(
    postgres: str, job: str, query: str, limit: int, host: str | None,
    window: tuple[float | None, float | None], raw: bool,
) -> list[Any]:  # fmt: skip
    from trawler.cli_dist import search_job

    try:
        return run_connected(search_job(postgres, job, query, limit, host, *window, raw))
    except KeyError:
        fail(f"no job {job!r} in the database")
    except ValueError as exc:
        fail(str(exc))


def _epoch(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"invalid {option}: {value!r} is not an ISO 8601 date")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
