"""Embedded frontier benchmark: memory, ingest and resume at millions of queued URLs.

    nice -n 10 .venv/bin/python bench/bench_frontier.py --urls 10000000 --hosts 10000 \\
        --data /tmp/bench-frontier [--markdown]

Generates URLs the way a crawl finds them (a page's 50 links: 40 on its own host,
10 on random hosts; depths 1..5), and pushes them through the embedded backend's
real path: ``filter_new`` (the seen set), then ``EmbeddedBackend.commit`` (one
SQLite transaction on a real file, the frontier's ``enqueue``) ``--chunk`` URLs
at a time, batched as the engine batches them (commits.py: a commit starts when
none runs, a batch waits for the running commit at BATCH_LIMIT_ITEMS). One chunk
in five repeats 10% of the URLs of the one before, so the seen set rejects some.
No page is fetched: the figures are the frontier's. CPU seconds are reported
beside wall-clock ones: on a shared machine the wall clock measures the others.

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
from collections.abc import Awaitable, Iterator
from pathlib import Path

from trawler.commits import COMMIT_MAX_ITEMS
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.gcpolicy import tune_for_crawling
from trawler.records import CrawlRequest
from trawler.store.base import CommitBatch
from trawler.store.embedded import EmbeddedBackend

LINKS_A_PAGE = 50
OWN_HOST = 40
# The engine's bound on the batch waiting for a commit (commits.BATCH_LIMIT_ITEMS;
# main, which had none, is run with the same batches).
BATCH_LIMIT_ITEMS = 20 * COMMIT_MAX_ITEMS
CONFIG = CrawlConfig(delay_s=0.0, parse_processes=0)


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


def batches(total: int, hosts: int, batch: int, seed: int = 11) -> Iterator[list[CrawlRequest]]:
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


async def ingest(data: Path, total: int, hosts: int, chunk: int) -> dict:
    """Discovery and commits overlap as in the engine: found URLs collect in a batch
    while the previous one commits; a commit starts when none runs and the batch
    has COMMIT_MAX_ITEMS; a batch at BATCH_LIMIT_ITEMS waits for the running commit."""
    backend = EmbeddedBackend(data)
    backend.store.create_job(CONFIG)
    frontier = await backend.open(CONFIG)
    base_rss = rss_mb()
    generated = generated_cpu = largest_commit = largest_filter = 0.0
    committing: asyncio.Task[float] | None = None
    pending: list[CrawlRequest] = []
    sizes: list[int] = []
    started = made = time.perf_counter()
    cpu_started, made_cpu = time.process_time(), time.thread_time()
    for requests in batches(total, hosts, chunk):
        filter_started = time.perf_counter()
        generated += filter_started - made
        generated_cpu += time.thread_time() - made_cpu  # the generator runs on this thread
        pending += await frontier.filter_new(requests)
        largest_filter = max(largest_filter, time.perf_counter() - filter_started)
        if committing is not None and (committing.done() or len(pending) >= BATCH_LIMIT_ITEMS):
            largest_commit = max(largest_commit, await committing)
            committing = None
        if committing is None and len(pending) >= COMMIT_MAX_ITEMS:
            sizes.append(len(pending))
            committing = asyncio.create_task(
                timed(backend.commit(CommitBatch(new_requests=pending)))
            )
            pending = []
        await asyncio.sleep(0)
        made, made_cpu = time.perf_counter(), time.thread_time()
    if committing is not None:
        largest_commit = max(largest_commit, await committing)
    await backend.commit(CommitBatch(new_requests=pending))
    spent = time.perf_counter() - started - generated
    cpu = time.process_time() - cpu_started - generated_cpu
    queued = frontier.queued
    figures = {
        "queued": queued,
        "ingest_s": round(spent, 1),
        "ingest_urls_per_s": round(queued / spent),
        "ingest_cpu_s": round(cpu, 1),
        "urls_per_cpu_s": round(queued / cpu),
        "generate_s": round(generated, 1),
        "commits": len(sizes),
        "mean_batch": round(sum(sizes) / max(1, len(sizes))),
        "largest_commit_s": round(largest_commit, 2),
        "largest_filter_new_s": round(largest_filter, 3),
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
    parser.add_argument("--chunk", type=int, default=500, help="URLs found at a time")
    parser.add_argument("--data", type=Path, default=Path("/tmp/bench-frontier"))
    parser.add_argument("--resume-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.resume_only:
        print(json.dumps(asyncio.run(resume(args.data))))
        return
    shutil.rmtree(args.data, ignore_errors=True)
    tune_for_crawling()  # as `trawler crawl` runs
    figures = asyncio.run(ingest(args.data, args.urls, args.hosts, args.chunk))
    child = subprocess.run(
        [sys.executable, __file__, "--resume-only", "--data", str(args.data)],
        capture_output=True, text=True, check=True, env=os.environ,
    )  # fmt: skip
    figures.update(json.loads(child.stdout))
    figures.update(urls=args.urls, hosts=args.hosts, load_avg=round(os.getloadavg()[0], 1))
    if args.markdown:
        print("| " + " | ".join(figures) + " |")
        print("|" + "---|" * len(figures))
        print("| " + " | ".join(str(v) for v in figures.values()) + " |")
    else:
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
