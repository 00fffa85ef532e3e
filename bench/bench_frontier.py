"""Embedded frontier benchmark: memory, ingest and resume at millions of queued URLs.

    nice -n 10 .venv/bin/python bench/bench_frontier.py --urls 10000000 --hosts 10000 \\
        --data /tmp/bench-frontier [--markdown]

Generates URLs the way a crawl finds them (a page's 50 links: 40 on its own host,
10 on random hosts; depths 1..5), and pushes them through the embedded backend's
real path: ``filter_new`` (the seen set), then ``EmbeddedBackend.commit`` (one
SQLite transaction on a real file, the frontier's ``enqueue``) in batches of
``--batch`` URLs. Every fifth batch repeats 10% of the URLs of the one before,
so the seen set rejects some. No page is fetched: the figures are the frontier's.

Then, in a fresh process, a resume: open the data directory and time the first
``next()``; its peak RSS is reported too. Runs against any version of Trawler
(the one on PYTHONPATH): the "before" figures come from main with the same script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path

from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest
from trawler.store.base import CommitBatch
from trawler.store.embedded import EmbeddedBackend

LINKS_A_PAGE = 50
OWN_HOST = 40
CONFIG = CrawlConfig(seeds=["http://host0.example/"], delay_s=0.0, parse_processes=0)


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mb() -> float:
    """Resident set size now, from /proc."""
    return _status_mb("VmRSS:")


def peak_rss_mb() -> float:
    """The peak since exec (ru_maxrss would carry the parent's over a fork)."""
    return _status_mb("VmHWM:")


def batches(total: int, hosts: int, batch: int, seed: int = 11):
    """Lists of CrawlRequests, ``batch`` URLs each, until ``total`` were made."""
    rng = random.Random(seed)
    made, previous = 0, []
    while made < total:
        out = []
        while len(out) < batch and made + len(out) < total:
            host = rng.randrange(hosts)
            parent = f"http://host{host}.example/section/{rng.randrange(1 << 30)}.html"
            depth = rng.randint(1, 5)
            for link in range(LINKS_A_PAGE):
                target = host if link < OWN_HOST else rng.randrange(hosts)
                url = f"http://host{target}.example/articles/{rng.getrandbits(40):x}/page.html"
                out.append(
                    CrawlRequest(url, depth, parent, f"host{target}.example", url_fingerprint(url))
                )
        if previous and rng.random() < 0.2:  # links to pages already seen
            out += rng.sample(previous, len(previous) // 10)
        previous = out
        made += len(out)
        yield out


def seen_bytes(frontier: object) -> int:
    seen = frontier._seen  # type: ignore[attr-defined]
    if hasattr(seen, "ram_bytes"):
        return int(seen.ram_bytes)
    return sys.getsizeof(seen) + 32 * len(seen)  # main: a set of Python ints


async def ingest(data: Path, total: int, hosts: int, batch: int) -> dict:
    """Discovery and commits overlap as in the engine: batch N+1 is filtered while
    batch N commits on the writer thread; at most one commit runs at a time."""
    backend = EmbeddedBackend(data)
    backend.store.create_job(CONFIG)
    frontier = await backend.open(CONFIG)
    base_rss = rss_mb()
    generated = largest_commit = largest_loop = 0.0
    committing: asyncio.Task[float] | None = None
    started = time.perf_counter()
    made = time.perf_counter()
    for requests in batches(total, hosts, batch):
        loop_started = time.perf_counter()
        generated += loop_started - made
        fresh = await frontier.filter_new(requests)
        largest_loop = max(largest_loop, time.perf_counter() - loop_started)
        if committing is not None:
            largest_commit = max(largest_commit, await committing)
        committing = asyncio.create_task(timed(backend.commit(CommitBatch(new_requests=fresh))))
        made = time.perf_counter()
    if committing is not None:
        largest_commit = max(largest_commit, await committing)
    spent = time.perf_counter() - started - generated
    queued = frontier.queued
    figures = {
        "queued": queued,
        "ingest_s": round(spent, 1),
        "ingest_urls_per_s": round(queued / spent),
        "generate_s": round(generated, 1),
        "largest_commit_s": round(largest_commit, 2),
        "largest_filter_new_s": round(largest_loop, 3),
        "rss_mb": round(rss_mb()),
        "peak_rss_mb": round(peak_rss_mb()),
        "rss_per_url_b": round((rss_mb() - base_rss) * 2**20 / queued, 1),
        "seen_b_per_url": round(seen_bytes(frontier) / queued, 1),
    }
    closing = time.perf_counter()
    await backend.close()
    figures["close_s"] = round(time.perf_counter() - closing, 1)
    figures["db_mb"] = round(sum(f.stat().st_size for f in data.iterdir()) / 2**20)
    return figures


async def timed(work: Awaitable[None]) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def resume(data: Path) -> dict:
    started = time.perf_counter()
    backend = EmbeddedBackend(data)
    frontier = await backend.open(CONFIG)
    request = await asyncio.wait_for(frontier.next(), 60)
    first = time.perf_counter() - started
    assert request is not None
    figures = {
        "resume_to_first_next_s": round(first, 2),
        "rss_after_resume_mb": round(rss_mb()),
        "peak_rss_resume_mb": round(peak_rss_mb()),
        "resume_queued": frontier.queued + 1,
    }
    await frontier.hand_back(request)
    backend.frontier = None  # as killed: nothing written back
    backend.conn.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/bench-frontier"))
    parser.add_argument("--resume-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.resume_only:
        print(json.dumps(asyncio.run(resume(args.data))))
        return
    shutil.rmtree(args.data, ignore_errors=True)
    figures = asyncio.run(ingest(args.data, args.urls, args.hosts, args.batch))
    child = subprocess.run(
        [sys.executable, __file__, "--resume-only", "--data", str(args.data)],
        capture_output=True, text=True, check=True, env=os.environ,
    )  # fmt: skip
    figures.update(json.loads(child.stdout))
    figures.update(urls=args.urls, hosts=args.hosts, batch=args.batch)
    if args.markdown:
        print("| " + " | ".join(figures) + " |")
        print("|" + "---|" * len(figures))
        print("| " + " | ".join(str(v) for v in figures.values()) + " |")
    else:
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
