"""Pricing a distributed job's revisit schedule (issue 15): what one worker's
``DistributedRevisits.reprice`` costs on a job of many pages.

    nice -n 5 .venv/bin/python bench/bench_reprice.py [--pages 100000] [--runs 5]
        [--json-out FILE]

A benchmark, not a test. It starts its own PostgreSQL (tests/servers.py), creates a
job and ``--pages`` revisit_state rows (COPY), each with a distinct change rate drawn
log-uniform over 1e-7 .. 1e-1 per second (rates learnt from visit histories are all
distinct: the worst case for grouping), then VACUUM ANALYZE. Each run is one forced
``reprice`` (store/dist_revisits.py) of the job's optimal policy: median and worst of
``--runs`` after one to warm the caches, in ms, with the price it found (so that two
implementations can be seen to agree) and the bytes the worker's process grew by.
Then the read alone, both ways: every page's rate fetched into Python (what
``reprice`` did before issue 15's fix, ``SELECT rate_per_s``) and the rates grouped
in PostgreSQL (store/pg_versions.py ``job_rate_groups``), with the rows each returns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from tests.servers import start_postgres  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402
from trawler.recrawl import RevisitWindow  # noqa: E402
from trawler.revisit_policy import OPTIMAL  # noqa: E402
from trawler.store import pg_versions as pv  # noqa: E402
from trawler.store.dist_revisits import DistributedRevisits  # noqa: E402
from trawler.store.postgres import PostgresStore  # noqa: E402

COLUMNS = ("job_id, url, host, final_url, version, version_at, last_visit_at,"
           " next_visit_at, rate_per_s, depth")  # fmt: skip


async def fill(store: PostgresStore, pages: int, rng: random.Random) -> str:
    job = await store.create_job(CrawlConfig())
    copying = f"COPY revisit_state ({COLUMNS}) FROM STDIN"
    async with store.pool.connection() as conn, conn.cursor() as cur, cur.copy(copying) as copy:
        for i in range(pages):
            url, host = f"http://h{i % 500}.bench.test/p{i}", f"h{i % 500}.bench.test"
            rate = 10 ** rng.uniform(-7, -1)
            await copy.write_row((job, url, host, url, 1, 0.0, 0.0, 1e9 + i, rate, 1))
    async with store.pool.connection() as conn:
        await conn.set_autocommit(True)
        await conn.execute("VACUUM ANALYZE revisit_state")
    return job


async def bench(url: str, pages: int, runs: int) -> dict:
    async with await PostgresStore.connect(url) as store:
        job = await fill(store, pages, random.Random(7))
        window = RevisitWindow(60.0, 30 * 86400.0, OPTIMAL)
        with tempfile.TemporaryDirectory() as warc:
            revisits = DistributedRevisits.open(store, job, window, Path(warc), "b0", 10**8, 30.0)
            try:
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                times = []
                for _ in range(runs + 1):
                    start = time.perf_counter()
                    await revisits.reprice(force=True)
                    times.append((time.perf_counter() - start) * 1000)
                rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            finally:
                revisits.close()
        reads = {name: await timed_read(store, job, read, runs) for name, read in READS.items()}
    times = times[1:]
    return {"pages": pages, "median_ms": round(statistics.median(times), 1),
            "worst_ms": round(max(times), 1), "price": revisits.schedule.price,
            "peak_rss_growth_kb": rss_after - rss_before, "reads": reads}  # fmt: skip


async def rows_into_python(conn: psycopg.AsyncConnection, job: str) -> list:
    cur = await conn.execute("SELECT rate_per_s FROM revisit_state WHERE job_id = %s", (job,))
    return [float(rate) for (rate,) in await cur.fetchall()]


READS = {"every rate into Python": rows_into_python, "grouped in PostgreSQL": pv.job_rate_groups}


async def timed_read(store: PostgresStore, job: str, read: Any, runs: int) -> dict:
    """Median ms of ``runs`` reads after one to warm up, and the rows one returns."""
    times, rows = [], 0
    for _ in range(runs + 1):
        async with store.pool.connection() as conn:
            start = time.perf_counter()
            rows = len(await read(conn, job))
            times.append((time.perf_counter() - start) * 1000)
    return {"median_ms": round(statistics.median(times[1:]), 1), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    server = start_postgres()
    try:
        result = asyncio.run(bench(server.create_database("bench_reprice"), args.pages,
                                   args.runs))  # fmt: skip
    finally:
        server.stop()
    print(json.dumps(result))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
