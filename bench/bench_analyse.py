"""Analysis benchmark: CPU µs per page of ``analyse`` in a tight loop, one process.

    .venv/bin/python bench/bench_analyse.py [--hosts 40] [--rounds 5] [--repeat 2]
    .venv/bin/python bench/bench_analyse.py --src /work/main --src .   # before / after

Every HTML page of ``--hosts`` hosts × 39 of the crawl benchmark's web (trawler.sitegen,
the pages bench/bench_parsepool.py builds) goes through ``analysis.analyse``, what the
parser process runs on each page. A round is one pass over all pages with a new
analyser (the link filter's memo empty, as at a crawl's start: each link URL is judged
cold once). Per page, thread CPU time, median of the rounds.

``--src`` runs the measurement on each Trawler source tree given (PYTHONPATH, one
subprocess each, this venv), ``--repeat`` times, the trees alternating so the machine's
load hits them alike; the pages are built by each tree's own sitegen. ``--check`` also
prints a digest of every stored value the analyses give (text, fingerprints, links,
anchors, requests), which must be the same on both trees.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def _measure(hosts: int, rounds: int, check: bool) -> dict[str, object]:
    sys.path.insert(0, str(HERE.parent))  # bench_parsepool, for its pages
    from bench_parsepool import benchmark_pages

    from trawler.analysis import AnalysisPool, analyse
    from trawler.config import CrawlConfig

    pages, seed_hosts = benchmark_pages(hosts)
    costs, digest = [], ""
    for _ in range(rounds + 1):  # the first warms the imports and caches: not counted
        pool = AnalysisPool(CrawlConfig(), 0)
        pool.start(seed_hosts)
        started = time.thread_time()
        analyses = [analyse(pool.analyser, request, result) for request, result in pages]
        costs.append(time.thread_time() - started)
        if check and not digest:
            digest = _digest(analyses)
    per_page_us = [cost * 1e6 / len(pages) for cost in costs[1:]]
    return {"pages": len(pages), "us": per_page_us, "digest": digest}


def _digest(analyses: list) -> str:
    """sha256 over everything an analysis stores or sends on, in order."""
    sha = hashlib.sha256()
    for analysis in analyses:
        page = analysis.outcome.page
        row = (repr(dataclasses.replace(page, fetched_at=0)),  # the rest is the page's
               repr(analysis.requests),
               sorted(analysis.rejected.items()), analysis.canonical_elsewhere,
               repr(analysis.edges), repr(analysis.anchors), repr(analysis.skipped))  # fmt: skip
        sha.update(repr(row).encode("utf-8", "surrogatepass"))
    return sha.hexdigest()


def _on_tree(src: Path, args: argparse.Namespace) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    command = [sys.executable, str(HERE), "--hosts", str(args.hosts), "--rounds", str(args.rounds)]
    command += ["--json", "--check"] if args.check else ["--json"]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=40, help="hosts of 39 pages each")
    parser.add_argument("--rounds", type=int, default=5, help="passes over the pages")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each --src, alternating")
    parser.add_argument("--src", action="append", type=Path, help="a Trawler source tree")
    parser.add_argument("--check", action="store_true", help="digest of the stored values")
    parser.add_argument("--json", action="store_true", help="this tree only, print JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(_measure(args.hosts, args.rounds, args.check)))
        return
    trees = args.src or [Path(".")]
    runs: dict[Path, list[dict[str, object]]] = {tree: [] for tree in trees}
    for _ in range(args.repeat):
        for tree in trees:
            runs[tree].append(_on_tree(tree, args))
    print(f"analyse() in a tight loop, {args.hosts} hosts; CPU µs per page, "
          f"median of {args.repeat} × {args.rounds} rounds")  # fmt: skip
    print("| tree | pages | µs / page | min | max |" + (" digest |" if args.check else ""))
    print("|---|---:|---:|---:|---:|" + ("---|" if args.check else ""))
    for tree, results in runs.items():
        values = [us for result in results for us in result["us"]]  # type: ignore[attr-defined]
        digest = f" {results[0]['digest']} |" if args.check else ""
        print(f"| {tree} | {results[0]['pages']} | {statistics.median(values):.1f} "
              f"| {min(values):.1f} | {max(values):.1f} |{digest}")  # fmt: skip


if __name__ == "__main__":
    main()
