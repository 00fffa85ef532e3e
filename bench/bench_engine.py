"""CPU per page of the whole crawl process: loop, engine, fetcher, frontier and writer.

A web shaped like the crawl benchmark's (``trawler.sitegen``: robots.txt,
sitemap.xml, ``--pages`` HTML pages a host, on ``--hosts`` loopback addresses)
is served by ``trawler.testsite`` in its own process. For each Trawler source
tree given (``--src``, e.g. ``git archive`` of main for "before" and this
checkout for "after") a crawl process runs ``trawler crawl`` over it with
``--delay 0`` (so the loop is always busy) and one parser process, and reports
its own CPU time (``time.process_time``: the event loop, the writer thread,
the thread pool; the parser process is another process, not counted) per page
stored, the event loop's thread's alone (``loop_us_per_page``, imports left
out), and its peak RSS. Trees run in turn, ``--repeat`` rounds, and the median
is reported.

    .venv/bin/python bench/bench_engine.py --src /tmp/main-tree --src . --repeat 3

``--profile FILE`` runs one crawl of the first tree under cProfile (the event
loop's thread only, its CPU time) and writes its stats to FILE (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# --- the server (its own process) ---------------------------------------------------


async def _serve(hosts: int, pages: int) -> None:
    from trawler.sitegen import SiteSpec
    from trawler.testsite import TestSite

    server = TestSite(SiteSpec(hosts=hosts, pages=pages, port=0, disallow_fraction=0.5))
    site = await server.start()
    print(json.dumps(site.seeds()), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()


# --- the crawl (its own process, the tree under test on its path) -------------------


def _crawl(data: str, seeds: list[str], profile: str | None) -> None:
    import time

    from trawler.cli import app

    for name in ("trawler.cli_crawljob", "trawler.engine"):  # imports are not per page
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    args = ["crawl", *seeds, "--data", data, "--delay", "0", "--allow-private", "-q",
            "--parse-processes", "1"]  # fmt: skip
    started, loop_started = time.process_time(), time.thread_time()
    try:
        if profile:
            import cProfile

            profiler = cProfile.Profile(time.thread_time)  # CPU time, not waits
            try:
                profiler.runcall(app, args)
            finally:
                profiler.dump_stats(profile)
        else:
            app(args)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise
    cpu_s = time.process_time() - started
    loop_cpu_s = time.thread_time() - loop_started  # this thread runs the event loop
    import sqlite3

    db = next(p for p in Path(data).rglob("*.db") if p.name != "jobs.db")
    with sqlite3.connect(db) as conn:
        pages = conn.execute("SELECT count(*) FROM pages").fetchone()[0]
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"cpu_s": cpu_s, "loop_cpu_s": loop_cpu_s, "pages": pages, "rss_mb": rss_mb}
    print(json.dumps(result), flush=True)


def _measure(src: Path, seeds: list[str], profile: str | None = None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    data = tempfile.mkdtemp(prefix="bench-engine-")
    try:
        args = [sys.executable, __file__, "--crawl", data, "--profile", profile or ""]
        out = subprocess.run(args, env=env, input=json.dumps(seeds), capture_output=True,
                             text=True, timeout=900)  # fmt: skip
        if out.returncode != 0:
            sys.exit(f"the crawl failed:\n{out.stderr[-3000:]}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    per_page_us = 1e6 / result["pages"]
    return {"us_per_page": round(result["cpu_s"] * per_page_us, 1),
            "loop_us_per_page": round(result["loop_cpu_s"] * per_page_us, 1),
            "pages": result["pages"], "peak_rss_mb": round(result["rss_mb"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, help="a Trawler source tree")
    parser.add_argument("--hosts", type=int, default=150)
    parser.add_argument("--pages", type=int, default=39)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--crawl", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.hosts, args.pages))
        return
    if args.crawl:
        _crawl(args.crawl, json.loads(sys.stdin.read()), args.profile or None)
        return
    trees = args.src or [Path(".")]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--hosts", str(args.hosts), "--pages",
         str(args.pages)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        seeds = json.loads(server.stdout.readline())
        if args.profile:
            print(_measure(trees[0], seeds, args.profile))
            return
        runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
        for _ in range(args.repeat):
            for tree in trees:
                result = _measure(tree, seeds)
                runs[tree].append(result)
                print(tree, result, flush=True)
        for tree, results in runs.items():
            for key in ("us_per_page", "loop_us_per_page"):
                values = [r[key] for r in results]
                print(f"{tree}: {key} median {statistics.median(values):.1f}, runs {values}")
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
