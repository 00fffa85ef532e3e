"""Issue 13: the dashboard's reads on a big job (N stored pages), on both backends.

    nice -n 5 python bench/bench_live.py [--pages 1000000] [--runs 5] [--backend both]

Builds one running job of N pages (fetched over the last N/100 seconds: 100 pages/s,
the newest now; 1,000 hosts; 2 % failed) by a bulk insert into the real schema:
embedded, the job is made by the job store (jobs/embedded.py) and its database by
store/sqlite.py ``connect`` (schema and migrations), then one ``executemany`` of the
pages and their URLs; distributed, the job by ``DistributedJobs.create_job`` (its row
in PostgreSQL, its seed in a real redis-server) and the pages by ``COPY`` into the
migrated schema (tests/servers.py starts both servers). The crawl's own write path
(the FTS index, WARC) is not used: the reads timed here do not look at them.

Then times, several runs each: one snapshot of the live stream (routes/events.py
``snapshot``, what the stream calls), /admin/stats (``collect_stats`` over
``all_jobs``), /admin/stats/timeseries (``collect_series``), /hosts?sort=fetched
(the reader's ``hosts``) and /jobs/{id}/errors (the reader's ``errors``). Prints the
median and the worst of each, in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers import start_postgres, start_redis  # noqa: E402
from trawler.api.deps import JobService  # noqa: E402
from trawler.api.routes.admin import all_jobs, collect_series, collect_stats  # noqa: E402
from trawler.api.routes.events import snapshot  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402
from trawler.store.sqlite import PAGE_COLUMNS  # noqa: E402

HOSTS = 1000
PACE = 100.0  # pages a second: N pages span N / PACE seconds, the newest now
TEXT = "lorem ipsum dolor sit amet " * 20  # ~540 bytes of extracted text a page
ERRORS = ("timeout", "connect_error", "http_5xx")


def host_of(i: int) -> str:
    return f"h{i % HOSTS}.example"


def page_rows(pages: int, now: float, start: int = 0) -> Iterator[tuple]:
    """Pages in commit order (PAGE_COLUMNS), fetched at PACE a second up to ``now``;
    a little jitter: fetches end out of their start order."""
    first = now - (start + pages) / PACE
    for i in range(start, start + pages):
        host = host_of(i)
        failed = i % 50 == 7
        values = {
            "url": f"http://{host}/p/{i}", "final_url": f"http://{host}/p/{i}",
            "status": None if failed else (200 if i % 20 else 404),
            "content_type": "text/html", "content_length": 0 if failed else 15_000 + i % 5000,
            "depth": 1 + i % 5, "parent_url": f"http://{host}/", "title": f"page {i}",
            "description": None, "keywords": None, "text": None if failed else TEXT,
            "links_count": 20, "content_sha256": f"{i:064x}",
            "fetched_at": first + i / PACE - (i % 7) * 0.05,
            "fetch_duration_s": 0.05 + (i % 13) / 100, "error": ERRORS[i % 3] if failed else None,
            "warc_file": "crawl-00000.warc.gz", "warc_offset": i * 16_000, "canonical": None,
            "noindex": False, "attempts": 1, "host": host, "duplicate_of": None,
            "simhash": f"{i:016x}", "text_hash": f"{i:032x}", "sitemap_lastmod": None,
            "minhash": None, "kind": "page",
        }  # fmt: skip
        yield tuple(values[name] for name in PAGE_COLUMNS)


# -- the job's data ---------------------------------------------------------------------


async def embedded_job(data: Path, pages: int) -> JobService:
    """A running job of ``pages`` pages in a new data directory; its reading service."""
    from trawler.api.datadir import DataDirJobs
    from trawler.jobs.embedded import EmbeddedJobStore
    from trawler.jobs.model import JobState
    from trawler.store.sqlite import DONE, SqliteStore, connect

    store = EmbeddedJobStore(data)
    config = CrawlConfig()
    job_id = await store.create(config)
    await store.transition(job_id, JobState.RUNNING, "bench")
    conn = connect(store.job_dir(job_id))
    SqliteStore(conn).create_job(config, job_id=job_id)
    as_older_version(conn)  # stored fast, counted once by the migration, timed
    marks = ", ".join("?" for _ in PAGE_COLUMNS)
    with conn:
        conn.executemany(
            f"INSERT INTO pages ({', '.join(PAGE_COLUMNS)}) VALUES ({marks})",
            page_rows(pages, time.time()),
        )
        conn.executemany(
            "INSERT INTO urls (host, depth, seq, fp, url, state) VALUES (?, 1, ?, ?, ?, ?)",
            ((host_of(i), i, i, f"http://{host_of(i)}/p/{i}", DONE) for i in range(pages)),
        )
        conn.executemany(
            "INSERT INTO host_queues VALUES (?, 100, ?)",
            ((f"h{h}.example", 100 + pages // HOSTS) for h in range(HOSTS)),
        )
    conn.close()
    started = time.monotonic()
    connect(store.job_dir(job_id)).close()
    print(f"embedded: the migration (totals counted, indexes built) took"
          f" {time.monotonic() - started:.1f} s", flush=True)  # fmt: skip
    return DataDirJobs(data)


async def distributed_job(redis_url: str, postgres_url: str, pages: int) -> JobService:
    """A running job of ``pages`` pages in PostgreSQL (its seed in Redis); the service."""
    from trawler.api.distributed import DistributedJobs

    service = await DistributedJobs.connect(redis_url, postgres_url)
    job = await service.create_job(CrawlConfig(), ["http://h0.example/"])
    columns = ", ".join(("job_id", *PAGE_COLUMNS))

    def copy() -> None:
        with service.pool.connection() as conn:
            with conn.cursor().copy(f"COPY pages ({columns}) FROM STDIN") as out:
                for row in page_rows(pages, time.time()):
                    out.write_row((job.id, *row))
            conn.execute("ANALYZE pages")

    await asyncio.to_thread(copy)
    return service


# -- the write path -----------------------------------------------------------------------

_DASHBOARDS = (
    "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'index', 'table')"
    " AND (name LIKE 'page_totals%' OR name LIKE 'urls_visited%'"
    " OR name IN ('pages_fetched', 'pages_failed'))"
)


def as_older_version(conn: sqlite3.Connection, kinds: tuple[str, ...] = ("table",)) -> None:
    """Drop the dashboard's totals, triggers and indexes: a database of the version
    before (the next writable ``connect`` migrates it); or only its ``kinds``."""
    for kind, name in conn.execute(_DASHBOARDS).fetchall():
        if kind in kinds or "table" in kinds:
            conn.execute(f"DROP {kind} {name}")
    conn.commit()


def write_cost(data: Path, pages: int, batch: int) -> dict[str, tuple[float, float]]:
    """µs a page (wall, CPU) of committing ``pages`` more pages in transactions of
    ``batch``, each acknowledging the page's URL (queued -> done) as the crawl's commit
    does: on the job's database as it is, then without the dashboard's triggers and
    indexes (dropped: the database is this run's own)."""
    from trawler.records import PageRecord
    from trawler.store.sqlite import DONE, SqliteStore, connect

    found = {}
    cases = (("with the dashboard's triggers and indexes", 10_000_000, ()),
             ("with its indexes, not its triggers", 20_000_000, ("trigger",)),
             ("without either", 30_000_000, ("table",)))  # fmt: skip
    for case, first, dropped in cases:
        conn = connect(data)
        as_older_version(conn, dropped)
        keys = [(host_of(i), i) for i in range(first, first + pages)]
        with conn:
            conn.executemany(
                "INSERT INTO urls (host, depth, seq, fp, url) VALUES (?, 1, ?, ?, ?)",
                [(host, i, i, f"http://{host}/p/{i}") for host, i in keys],
            )
        records = [PageRecord(*row) for row in page_rows(pages, time.time(), first)]
        wall = cpu = 0.0
        for start in range(0, pages, batch):
            began, began_cpu = time.perf_counter(), time.process_time()
            conn.execute("BEGIN")
            SqliteStore(conn).insert_pages(records[start : start + batch])
            conn.executemany(
                f"UPDATE urls SET state = {DONE} WHERE host = ? AND depth = 1 AND seq = ?",
                keys[start : start + batch],
            )
            conn.commit()
            wall += time.perf_counter() - began
            cpu += time.process_time() - began_cpu
        conn.close()
        found[case] = (round(wall / pages * 1e6, 1), round(cpu / pages * 1e6, 1))
    return found


def store_dir(data: Path) -> Path:
    """The one job's directory in ``data``."""
    return next(path.parent for path in (data / "jobs").glob("*/trawler.db"))


# -- the timings ---------------------------------------------------------------------------


async def timed(read: Callable[[], Awaitable[object]], runs: int) -> tuple[float, float]:
    """(median, worst) ms of ``runs`` calls, after one to warm the caches."""
    await read()
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        await read()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took), max(took)


async def measure(name: str, service: JobService, runs: int) -> None:
    jobs = await all_jobs(service)
    job_id = jobs[0].id

    async def stats() -> object:
        return await collect_stats(service, await all_jobs(service), await service.workers())

    async def series() -> object:
        return await collect_series(service, await all_jobs(service))

    async def in_reader(read: Callable) -> object:
        def call() -> object:
            with service.reader(job_id) as reader:
                return read(reader)

        return await asyncio.to_thread(call)

    reads: dict[str, Callable[[], Awaitable[object]]] = {
        "snapshot": lambda: snapshot(service),
        "/admin/stats": stats,
        "/admin/stats/timeseries": series,
        "/hosts?sort=fetched": lambda: in_reader(lambda r: r.hosts(0, 50, "fetched")),
        "/jobs/{id}/errors": lambda: in_reader(lambda r: r.errors(50)),
    }
    for what, read in reads.items():
        median, worst = await timed(read, runs)
        print(f"{name:12} {what:26} median {median:8.1f} ms   worst {worst:8.1f} ms", flush=True)


async def main(args: argparse.Namespace) -> None:
    if args.backend in ("embedded", "both"):
        with tempfile.TemporaryDirectory(prefix="bench-live-") as data:
            started = time.monotonic()
            service = await embedded_job(Path(data), args.pages)
            print(f"embedded: {args.pages} pages stored in {time.monotonic() - started:.1f} s")
            await measure("embedded", service, args.runs)
            if args.write_pages:
                job = store_dir(Path(data))
                for case, (wall, cpu) in write_cost(job, args.write_pages, 100).items():
                    print(f"embedded     commit of 100 pages, {case}: {wall} µs a page"
                          f" ({cpu} CPU)", flush=True)  # fmt: skip
    if args.backend in ("postgres", "both"):
        tmp = Path(tempfile.mkdtemp(prefix="bench-live-redis-"))
        redis, postgres = start_redis(tmp, appendonly=False), start_postgres()
        try:
            started = time.monotonic()
            service = await distributed_job(redis.url, postgres.url, args.pages)
            print(f"postgres: {args.pages} pages stored in {time.monotonic() - started:.1f} s")
            try:
                await measure("postgres", service, args.runs)
            finally:
                await service.close()  # type: ignore[attr-defined]
        finally:
            postgres.stop()
            redis.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--write-pages",
        type=int,
        default=0,
        help="then time committing this many more pages (embedded)",
    )
    parser.add_argument("--backend", choices=("embedded", "postgres", "both"), default="both")
    asyncio.run(main(parser.parse_args()))
