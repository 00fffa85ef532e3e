"""Recrawl: bandwidth saved by conditional GET, and freshness, adaptive vs fixed.

    nice -n 5 .venv/bin/python bench/bench_recrawl.py [--pages 30] [--duration 20]
        [--seed 1] [--policy optimal|proportional]

A local site (an aiohttp server in a thread of this process) serves ``--pages``
pages whose content changes by Poisson processes of known rates (log-uniform
from one change every 2 s to one a minute, a quarter never), with ETags. Each of
two phases crawls the site with `trawler crawl`, then revisits it for
``--duration`` seconds with the real ``Recrawler``:

1. adaptive: the change-rate estimator within [0.5 s, 20 s], intervals chosen by
   ``--policy`` (revisit_policy.py: optimal, the default, or proportional);
2. fixed: every page at one interval, chosen so that the phase makes as many
   fetches as phase 1 did (``RevisitWindow(I, I)``), the first visits spread
   over one interval as a round robin would.

Both phases replay the same change timeline (times from the phase's start).
Reported per phase: fetches, body bytes received and the bytes the same fetches
would have cost without conditional GET (every answer a full 200), and freshness:
the share of pages whose stored latest version is the one the site serves now,
sampled every 0.25 s after the crawl (Cho & Garcia-Molina's freshness, averaged).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from pathlib import Path

from aiohttp import web

from trawler.config import CrawlConfig
from trawler.jobs.layout import find_job_dir
from trawler.recrawl import RevisitWindow
from trawler.recrawl_run import Recrawler, RecrawlOptions
from trawler.recrawl_store import RecrawlStore
from trawler.revisit_policy import OPTIMAL, POLICIES
from trawler.store import sqlite as db

PAGE_BYTES = 4000
SAMPLE_S = 0.25


class Timeline:
    """Each page's change times (seconds from the phase's start) and its content."""

    def __init__(self, pages: int, horizon_s: float, seed: int) -> None:
        rng = random.Random(seed)
        self.rates = [
            0.0 if i % 4 == 3 else math.exp(rng.uniform(math.log(1 / 60), math.log(1 / 2)))
            for i in range(pages)
        ]
        self.changes = [_poisson_times(rate, horizon_s, rng) for rate in self.rates]
        self.started = time.time()

    def edition(self, page: int, now: float) -> int:
        return bisect_right(self.changes[page], now - self.started)

    def body(self, page: int, edition: int) -> bytes:
        head = f"<!doctype html><title>p{page}</title><main><p>page {page} edition {edition}</p>"
        return (head + "x" * (PAGE_BYTES - len(head)) + "</main>").encode()

    def sha(self, page: int, now: float) -> str:
        return hashlib.sha256(self.body(page, self.edition(page, now))).hexdigest()


def _poisson_times(rate: float, horizon_s: float, rng: random.Random) -> list[float]:
    times, t = [], 0.0
    while rate > 0:
        t += rng.expovariate(rate)
        if t > horizon_s:
            break
        times.append(t)
    return times


def serve(timeline: Timeline) -> str:
    """Start the site in a thread; returns its base URL."""

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/":
            links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(len(timeline.rates)))
            return web.Response(text=links, content_type="text/html")
        if not request.path.startswith("/p"):
            return web.Response(status=404)
        page = int(request.path[2:])
        body = timeline.body(page, timeline.edition(page, time.time()))
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type="text/html", headers={"ETag": etag})

    ready: list[str] = []
    started = threading.Event()

    def run() -> None:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        ready.append(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/")  # type: ignore[union-attr]
        started.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    started.wait(10)
    return ready[0]


def phase(
    base: str, timeline: Timeline, window: RevisitWindow, duration_s: float, stagger: bool
) -> dict:
    data = Path(tempfile.mkdtemp(prefix="bench-recrawl-"))
    timeline.started = time.time()
    subprocess.run(
        [sys.executable, "-m", "trawler", "crawl", base, "--data", str(data), "--delay", "0.02",
         "--allow-private", "--no-sitemaps", "-q"], check=True,
    )  # fmt: skip
    job = find_job_dir(data, None)
    if stagger:  # fixed: first visits spread over one interval, as a round robin would
        conn = db.connect(job)
        store = RecrawlStore(conn, job, window, 1 << 30)
        store.seed()
        with store.conn:
            store.conn.execute(
                "UPDATE revisit_state SET next_visit_at = last_visit_at + ?"
                " * ((rowid % ?) + 1.0) / ?", (window.min_s, len(timeline.rates),
                                            len(timeline.rates)),
            )  # fmt: skip
        store.close()
        conn.close()
    config = CrawlConfig(delay_s=0.02, allow_private=True)
    recrawler = Recrawler(job, config, RecrawlOptions(window, True, duration_s))
    freshness = asyncio.run(_run_sampled(recrawler, job, timeline))
    conn = sqlite3.connect(job / "trawler.db")
    visits = conn.execute("SELECT count(*), sum(body_bytes) FROM visits").fetchone()
    conn.close()
    return {"fetches": visits[0], "body_bytes": visits[1] or 0,
            "full_bytes": visits[0] * PAGE_BYTES, "freshness": freshness}  # fmt: skip


async def _run_sampled(recrawler: Recrawler, job: Path, timeline: Timeline) -> float:
    run = asyncio.create_task(recrawler.run())
    samples: list[float] = []
    reader = sqlite3.connect(f"file:{job / 'trawler.db'}?mode=ro", uri=True)
    while not run.done():
        await asyncio.sleep(SAMPLE_S)
        stored = _stored_shas(reader)
        if not stored:
            continue
        now = time.time()
        fresh = sum(stored.get(i) == timeline.sha(i, now) for i in range(len(timeline.rates)))
        samples.append(fresh / len(timeline.rates))
    await run
    reader.close()
    return statistics.fmean(samples) if samples else 0.0


def _stored_shas(conn: sqlite3.Connection) -> dict[int, str]:
    try:
        rows = conn.execute("SELECT url, content_sha256 FROM revisit_state").fetchall()
    except sqlite3.OperationalError:
        return {}
    return {int(url.rsplit("/p", 1)[1]): sha for url, sha in rows if "/p" in url}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", choices=POLICIES, default=OPTIMAL)
    args = parser.parse_args()
    timeline = Timeline(args.pages, args.duration + 60, args.seed)
    base = serve(timeline)
    window = RevisitWindow(0.5, 20.0, args.policy)
    adaptive = phase(base, timeline, window, args.duration, False)
    interval = args.duration * args.pages / max(1, adaptive["fetches"])
    fixed = phase(base, timeline, RevisitWindow(interval, interval), args.duration, True)
    print(f"{args.pages} pages, {args.duration:g} s, seed {args.seed}, policy {args.policy},"
          f" fixed interval {interval:.2f} s")  # fmt: skip
    for name, result in (("adaptive", adaptive), ("fixed", fixed)):
        saved = 1 - result["body_bytes"] / max(1, result["full_bytes"])
        print(f"{name:9s} fetches {result['fetches']:5d}  body bytes {result['body_bytes']:8d}"
              f" (without conditional GET {result['full_bytes']:8d}: {saved:.0%} saved)"
              f"  freshness {result['freshness']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
