"""The `trawler` command: crawl, robots, testsite (export, stats, search: cli_read.py;
distributed commands: cli_dist.py).

The CLI sits on top of everything and decides nothing about crawling; it
turns options into a CrawlConfig, picks the data directory, and reports.
Errors are one line; exit codes are in cli_common.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
import sys
from enum import Enum, StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from trawler.cli_common import (
    DEFAULT_DATA,
    EXIT_FAILED,
    EXIT_SIGNAL_BASE,
    Commands,
    DataOpt,
    ReaderGone,
    fail,
)
from trawler.cli_dist import register as register_distributed
from trawler.cli_jobs import register as register_jobs
from trawler.cli_read import register as register_read
from trawler.cli_recrawl import RevisitPolicy, recrawl_summary, revisit_window
from trawler.cli_recrawl import register as register_recrawl
from trawler.cli_serve import register as register_serve
from trawler.cli_services import register as register_services
from trawler.cli_why import register as register_why
from trawler.config import ConfigError, CrawlConfig, build_config
from trawler.progress import progress_reporter
from trawler.recrawl import DEFAULT_REVISIT_MAX_S, DEFAULT_REVISIT_MIN_S

app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Trawler: a polite, fast, crash-safe web crawler.",
)


class Scope(StrEnum):
    host = "host"
    domain = "domain"
    any = "any"


class Render(StrEnum):
    never = "never"
    auto = "auto"
    always = "always"


class Priority(StrEnum):
    depth = "depth"
    importance = "importance"


class RenderResources(StrEnum):
    same_host = "same-host"
    all = "all"
    none = "none"


@app.command()
def crawl(
    ctx: typer.Context,
    seeds: Annotated[list[str] | None, typer.Argument(help="Seed URLs.", show_default=False)] = None,
    data: DataOpt = DEFAULT_DATA,
    seeds_file: Annotated[Path | None, typer.Option(help="File with one seed URL a line; - for stdin.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file of crawl options.")] = None,
    max_depth: Annotated[int | None, typer.Option(help="Link hops from the seeds (seeds: 0).")] = None,
    max_pages: Annotated[int | None, typer.Option(help="Stop after this many pages.")] = None,
    max_pages_per_host: Annotated[int | None, typer.Option(help="At most this many URLs of one host.")] = None,
    scope: Annotated[Scope | None, typer.Option(help="Follow links on the seeds' host, registrable domain, or anywhere.")] = None,
    include: Annotated[list[str] | None, typer.Option(help="Only URLs matching this regex (repeatable).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(help="Never URLs matching this regex (repeatable).")] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds between two requests to one host [1.0].")] = None,
    max_crawl_delay: Annotated[float | None, typer.Option(help="Ceiling for robots.txt Crawl-delay [60].")] = None,
    user_agent: Annotated[str | None, typer.Option(help="User-Agent header.")] = None,
    robots_agent: Annotated[str | None, typer.Option(help="robots.txt product token [from the User-Agent: the product after 'compatible;' in Mozilla/… strings, else the first].")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight across all hosts [256].")] = None,
    allow_private: Annotated[bool | None, typer.Option("--allow-private", help="Allow fetching loopback/private addresses.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Total seconds per request [30].")] = None,
    connect_timeout: Annotated[float | None, typer.Option(help="Seconds to connect [10].")] = None,
    first_byte_timeout: Annotated[float | None, typer.Option(help="Seconds to connect and receive the response headers [10].")] = None,
    max_bytes: Annotated[int | None, typer.Option(help="Body size cap in bytes [10 MB].")] = None,
    strip_param: Annotated[list[str] | None, typer.Option(help="Extra query parameter to strip (repeatable; 'x_*' = prefix).")] = None,
    warc_max_bytes: Annotated[int | None, typer.Option(help="Rotate WARC files past this size [1 GiB].")] = None,
    sitemaps: Annotated[bool | None, typer.Option("--sitemaps/--no-sitemaps", help="Read robots.txt Sitemap: lines and /sitemap.xml of seed hosts [on].")] = None,
    tdmrep: Annotated[bool | None, typer.Option("--tdmrep/--no-tdmrep", help="Read each origin's /.well-known/tdmrep.json (TDM reservations of its paths): one request more per origin [off].")] = None,
    sitemap_depth: Annotated[int | None, typer.Option(help="Depth at which sitemap URLs enter the frontier [1].")] = None,
    parse_processes: Annotated[int | None, typer.Option(help="Processes parsing pages beside the crawl loop; 0 = in the loop [one per spare core].")] = None,
    parse_time_limit: Annotated[float | None, typer.Option(help="CPU seconds one page may take in a parser process [10].")] = None,
    near_duplicate_bits: Annotated[int | None, typer.Option(help="SimHash index radius N: pages within 2N+1 bits are near-duplicate candidates, confirmed by MinHash [3].")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="Fetch attempts per URL for timeouts, connect errors, 5xx, 429, 503 [3].")] = None,
    max_links_per_page: Annotated[int | None, typer.Option(help="Links taken from one page [5000].")] = None,
    robots_retry_wait: Annotated[list[float] | None, typer.Option(help="Waits before retrying an unreachable robots.txt (repeatable) [5 30 120].")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The job to resume (or to add seeds to) [a new job with seeds, else the newest unfinished one].")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    recrawl: Annotated[bool | None, typer.Option("--recrawl/--no-recrawl", help="A continuous job: revisit each stored page when due, beside new URLs, until stopped (SIGINT/SIGTERM); kept with the job [off].")] = None,
    revisit_min: Annotated[float | None, typer.Option("--revisit-min", help="Shortest interval between two visits of a page, seconds [3600].")] = None,
    revisit_max: Annotated[float | None, typer.Option("--revisit-max", help="Longest interval between two visits of a page, seconds [30 days].")] = None,
    revisit_policy: Annotated[RevisitPolicy | None, typer.Option("--revisit-policy", help="optimal: the intervals that keep most pages fresh for the fetches proportional would make (pages changing too often for that are visited less); proportional: visit a page as often as it changes [optimal].")] = None,
    priority: Annotated[Priority | None, typer.Option(help="The order of each host's queue and of new hosts' first visits: depth (shallowest first) or importance (most OPIC cash first: pages many pages link to); embedded frontier only [depth].")] = None,
    render: Annotated[Render | None, typer.Option(help="Run pages' JavaScript in chromium: never, auto (pages that look like an application shell; a host whose renders add nothing is rendered no more) or always [never].")] = None,
    render_resources: Annotated[RenderResources | None, typer.Option(help="Subresources a rendered page may load, each through the crawler's politeness: same-host, all or none; never images, media or fonts [same-host].")] = None,
    render_concurrency: Annotated[int | None, typer.Option(help="Pages rendered at a time (browser contexts) [2].")] = None,
    render_timeout: Annotated[float | None, typer.Option(help="Seconds to render one page; past it the static page is kept [20].")] = None,
) -> None:  # fmt: skip
    """Crawl from seed URLs into DATA as a new job; with no seeds, resume the newest
    unfinished job in DATA (or --job's)."""
    from trawler import cli_crawljob as cj
    from trawler import gcpolicy
    from trawler.engine import Crawler
    from trawler.jobs import jobdata
    from trawler.render.browser import RenderUnavailable
    from trawler.store.sqlite import NotTrawlerData

    # Bad values exit 2 before anything; one given alone is checked against the default.
    revisit_window(
        _first(revisit_min, DEFAULT_REVISIT_MIN_S), _first(revisit_max, DEFAULT_REVISIT_MAX_S)
    )
    cli = cli_settings(ctx.params)
    _lock = cj.lock_data(data)  # held until this process ends: one crawl per directory
    jobs = cj.open_jobs(data)
    picked = cj.chosen_job(jobs, data, job, bool(seeds) or seeds_file is not None)
    _job_lock, picked = cj.lock_picked(jobs, data, picked)  # no other process runs it
    try:
        cfg = build_config(cli, config, base=cj.stored_config(jobs, picked))
    except ConfigError as exc:
        fail(str(exc))
    if cfg.render != "never":
        render_available()
    spool = read_seeds(seeds or [], seeds_file, cfg)  # every seed checked before any is added
    if picked is None and not spool.count:
        fail("no seed URLs given (arguments, --seeds-file or --config)")
    if picked is not None and picked.seeding and not spool.count:
        fail(f"job {picked.id} in {data} stopped while adding its seeds; give them again"
             f" with --job {picked.id} (seeds already added are skipped)")  # fmt: skip
    job_id = cj.begin(jobs, picked, cfg, spool.count)
    if _job_lock is None:  # a new job: created seeding, which no server starts
        _job_lock = cj.lock_job_of(data, job_id)
    try:
        backend = jobdata.job_backend(data, job_id)
        stored_pages = jobdata.record_run_start(
            backend, job_id, cfg, "seeding" if spool.count else "running"
        )
    except (OSError, sqlite3.Error, NotTrawlerData) as exc:
        fail(f"cannot use data directory {data}: {exc}", EXIT_FAILED)
    if not quiet:
        verb = "resuming" if picked else "starting"
        typer.echo(f"{verb} job {job_id} in {data}: {spool.count} new seed(s)", err=True)
    with spool, progress_reporter(quiet) as report:
        crawler = Crawler(cfg, backend, on_progress=report, seeds=spool.chunks())
        gcpolicy.tune_for_crawling()
        try:
            complete, stop_signal = asyncio.run(_run(crawler, stored_pages, jobs, job_id, data))
        except (OSError, sqlite3.Error) as exc:
            # Nothing committed is lost: the next `trawler crawl --data` resumes.
            cj.end(jobs, job_id, False, f"cannot write crawl data: {exc}")
            fail(f"cannot write crawl data in {data}: {exc}; stopped, resume when fixed", 1)
        except RenderUnavailable as exc:  # chromium would not start: nothing was fetched
            cj.end(jobs, job_id, False, str(exc))
            fail(str(exc), 1)
    jobdata.record_run_end(data, job_id, complete)
    reason = "complete" if complete else f"signal {stop_signal}" if stop_signal else "stopped"
    ended = cj.end(jobs, job_id, complete, reason)
    if not quiet:
        typer.echo(
            f"{ended}: {crawler.pages_stored} pages stored, {crawler.not_html} not HTML,"
            f" {crawler.errors} errors in this run; data in {data}", err=True,
        )  # fmt: skip
    if crawler.revisits is not None and not quiet:  # a continuous job
        typer.echo(f"job {job_id}: {recrawl_summary(crawler.revisits.totals)}", err=True)
    if not complete and stop_signal is not None:
        raise typer.Exit(EXIT_SIGNAL_BASE + stop_signal)  # a stop, not the end


def render_available() -> None:
    """A one-line error, before anything starts, when --render cannot be done."""
    from trawler.render.browser import RenderUnavailable, check_available

    try:
        check_available()
    except RenderUnavailable as exc:
        fail(str(exc))


def _first(value: float | None, default: float) -> float:
    return default if value is None else value


# CLI parameter name -> CrawlConfig field, for the options `crawl` and `submit` share.
_CONFIG_PARAMS = {
    "max_depth": "max_depth", "max_pages": "max_pages", "max_pages_per_host": "max_pages_per_host",
    "scope": "scope", "include": "include", "exclude": "exclude", "delay": "delay_s",
    "max_crawl_delay": "max_crawl_delay_s", "user_agent": "user_agent",
    "robots_agent": "robots_agent", "concurrency": "concurrency",
    "allow_private": "allow_private", "timeout": "timeout_s",
    "connect_timeout": "connect_timeout_s", "first_byte_timeout": "first_byte_timeout_s",
    "max_bytes": "max_bytes", "strip_param": "strip_params",
    "warc_max_bytes": "warc_max_bytes", "sitemaps": "sitemaps", "sitemap_depth": "sitemap_depth",
    "tdmrep": "tdmrep",
    "near_duplicate_bits": "near_duplicate_bits", "max_attempts": "max_attempts",
    "max_links_per_page": "max_links_per_page", "robots_retry_wait": "robots_retry_waits_s",
    "parse_processes": "parse_processes", "parse_time_limit": "parse_time_limit_s",
    "recrawl": "recrawl", "revisit_min": "revisit_min_s", "revisit_max": "revisit_max_s",
    "revisit_policy": "revisit_policy", "priority": "priority",
    "render": "render", "render_resources": "render_resources",
    "render_concurrency": "render_concurrency", "render_timeout": "render_timeout_s",
}  # fmt: skip


def cli_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The crawl options the user gave, as CrawlConfig fields (None = not given)."""
    settings = {field: params.get(name) for name, field in _CONFIG_PARAMS.items()}
    for name in ("scope", "render", "render_resources", "revisit_policy", "priority"):
        if isinstance(value := settings[name], Enum):
            settings[name] = value.value
    return settings


def read_seeds(arguments: list[str], seeds_file: Path | None, cfg: CrawlConfig) -> Any:
    """The seeds checked and normalised into a spool (seeds.py), or a one-line error."""
    from trawler.seeds import SeedError, spool_seeds
    from trawler.urls import Normaliser

    try:
        return spool_seeds(arguments, seeds_file, Normaliser(cfg.tracking_params))
    except SeedError as exc:
        fail(str(exc))


async def _run(
    crawler: Any, stored_pages: int, jobs: Any, job_id: str, data: Path
) -> tuple[bool, int | None]:
    """Run the crawl; SIGINT/SIGTERM stop it cleanly, a second one cuts the grace short.
    The job's state set from another process (pause, resume, cancel) is followed, and
    so are the operators' controls (blocklist, politeness) of the data directory.

    Returns (complete, the number of the first signal received or None).
    """
    from trawler.jobs.controls import follow_controls
    from trawler.jobs.embedded_controls import EmbeddedControlStore
    from trawler.jobs.follow import Controls, follow_job
    from trawler.slowstop import watch_stop

    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    received: list[int] = []
    watching: list[asyncio.Task[None]] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        if len(received) == 1:
            crawler.stop()
            watching.append(watch_stop())
        elif main_task is not None:
            main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    controls = Controls(crawler.pause, crawler.resume, crawler.stop)
    following = asyncio.create_task(follow_job(partial(jobs.state, job_id), controls))
    operators = EmbeddedControlStore(data)
    await _apply_stored_controls(operators, crawler)  # before the first request
    obeying = asyncio.create_task(
        follow_controls(operators, crawler.services, crawler.apply_politeness)
    )
    try:
        complete = await crawler.run(stored_pages)
    except asyncio.CancelledError:
        complete = False
    finally:
        following.cancel()
        obeying.cancel()
        for task in watching:
            task.cancel()
    return complete, received[0] if received else None


async def _apply_stored_controls(operators: Any, crawler: Any) -> None:
    from trawler.jobs.controls import apply_controls

    try:
        state = await operators.state()
    except (OSError, sqlite3.Error) as exc:  # followed later, as soon as it can be read
        logging.getLogger("trawler").warning("cannot read the operators' controls: %s", exc)
        return
    apply_controls(state, crawler.services)
    crawler.apply_politeness(state.politeness)


@app.command()
def robots(
    url: Annotated[str, typer.Argument(help="The URL to check.")],
    agent: Annotated[str | None, typer.Option("--agent", help="User-Agent to check for [Trawler's].")] = None,
    robots_agent: Annotated[str | None, typer.Option(help="robots.txt product token [from the User-Agent].")] = None,
    allow_private: Annotated[bool, typer.Option("--allow-private", help="Allow loopback/private addresses.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:  # fmt: skip
    """Fetch robots.txt and show the verdict for URL and the rule that decided it."""
    from trawler.robotscheck import check_robots, format_report

    try:
        cfg = build_config({"user_agent": agent, "robots_agent": robots_agent,
                            "allow_private": allow_private or None})  # fmt: skip
    except ConfigError as exc:
        fail(str(exc))
    try:
        report = asyncio.run(check_robots(url, cfg))
    except ValueError as exc:
        fail(str(exc))
    typer.echo(json.dumps(report.as_dict()) if as_json else format_report(report))


@app.command()
def testsite(
    hosts: Annotated[int, typer.Option(min=1, max=60000, help="Number of hosts.")] = 20,
    pages: Annotated[int, typer.Option(min=1, help="Pages per host.")] = 50,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on every host address.")] = 8800,
    access_log: Annotated[Path | None, typer.Option(help="Write a JSON-lines access log here.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed of the generated site.")] = 1,
) -> None:  # fmt: skip
    """Serve a generated multi-host test web on loopback addresses (127.0.x.y)."""
    from trawler.testsite import run_testsite

    try:
        run_testsite(hosts, pages, port, access_log, seed)
    except OSError as exc:
        fail(f"cannot listen on port {port}: {exc.strerror or exc}", 1)


register_read(app)
register_recrawl(app)
register_jobs(app)
register_serve(app)
register_services(app)
register_why(app)
register_distributed(app, fail, cli_settings, read_seeds)


def main() -> None:
    """Entry point: click errors become one line and exit code 2."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    command = typer.main.get_command(app)
    try:
        args = sys.argv[1:] or ["--help"]
        exit_code = command.main(args, prog_name="trawler", standalone_mode=False)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except typer.TyperException as exc:  # click's errors (vendored by Typer) derive from it
        code = getattr(exc, "exit_code", 2)
        message = " ".join(exc.format_message().split()) if code == 2 else exc.format_message()
        print(f"trawler: error: {message}" if code == 2 else message, file=sys.stderr)
        sys.exit(code)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C outside the crawl loop
        sys.exit(EXIT_SIGNAL_BASE + signal.SIGINT)
    except (ReaderGone, BrokenPipeError):
        # `trawler export | head`: the reader has what it wants. Point stdout at
        # /dev/null so the flush at exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    # Without standalone mode click returns the code of typer.Exit instead of exiting.
    sys.exit(exit_code if isinstance(exit_code, int) else 0)
