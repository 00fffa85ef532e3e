"""Importance-first order against depth order on a skewed web (issue 18).

    .venv/bin/python bench/bench_importance.py [--hosts 10] [--pages 500] [--seeds 1 2 3]
        [--concurrency N] [--delay 0]

For each web seed, serves the generated web of trawler/skewweb.py (power-law
in-degree; the most-linked pages anywhere in the tree) on loopback, runs
``trawler crawl --priority depth`` and ``--priority importance`` on every host's
home page, reads the order pages were fetched in from the server's access log,
and reports the share of the top 10% of pages by true in-degree fetched within
the first 20% of the crawl (and within the first 10% and 50%), with each
crawl's wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trawler.skewweb import SkewSpec, SkewWeb, early_share

ROOT = Path(__file__).resolve().parent.parent
EARLY = (0.1, 0.2, 0.5)


def serve(spec: SkewSpec, log_path: Path) -> tuple[subprocess.Popen[str], list[str]]:
    cmd = [sys.executable, "-m", "trawler.skewweb", "--hosts", str(spec.hosts), "--pages",
           str(spec.pages), "--seed", str(spec.seed), "--access-log", str(log_path)]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, [line.strip() for line in iter(process.stdout.readline, "ready\n")]


def fetched(log_path: Path, seeds: list[str], skip: int) -> list[tuple[int, int]]:
    hosts = {seed.split("/")[2]: i for i, seed in enumerate(seeds)}
    order = []
    for line in log_path.read_text().splitlines()[skip:]:
        entry = json.loads(line)
        number = SkewWeb.page_of(entry["path"])
        if number is not None:
            order.append((hosts[entry["host"]], number))
    return order


def crawl(seeds: list[str], data: Path, priority: str, args: argparse.Namespace) -> float:
    cmd = [str(ROOT / ".venv/bin/trawler"), "crawl", *seeds, "--data", str(data), "-q",
           "--allow-private", "--no-sitemaps", "--scope", "any", "--delay", str(args.delay),
           "--priority", priority]  # fmt: skip
    cmd += ["--concurrency", str(args.concurrency)] if args.concurrency else []
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - started


def one_web(spec: SkewSpec, args: argparse.Namespace, work: Path) -> dict:
    web = SkewWeb(spec)
    top = web.top(0.1)
    log_path = work / f"access-{spec.seed}.jsonl"
    process, seeds = serve(spec, log_path)
    report: dict = {"seed": spec.seed, "pages": len(web.out), "top": len(top)}
    try:
        for priority in ("depth", "importance"):
            skip = len(log_path.read_text().splitlines())
            wall_s = crawl(seeds, work / f"data-{spec.seed}-{priority}", priority, args)
            order = fetched(log_path, seeds, skip)
            assert sorted(order) == sorted(web.out), "every page fetched once"
            shares = {
                f"top10_in_first_{round(e * 100)}pct": early_share(top, order, e) for e in EARLY
            }
            report[priority] = {
                "wall_s": round(wall_s, 2),
                **{k: round(v, 3) for k, v in shares.items()},
            }
    finally:
        process.terminate()
        process.wait(10)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--pages", type=int, default=500, help="pages per host")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="web seeds")
    parser.add_argument("--concurrency", type=int, help="trawler --concurrency")
    parser.add_argument("--delay", type=float, default=0.0, help="trawler --delay (s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-importance-") as tmp:
        for seed in args.seeds:
            spec = SkewSpec(hosts=args.hosts, pages=args.pages, seed=seed)
            print(json.dumps(one_web(spec, args, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
