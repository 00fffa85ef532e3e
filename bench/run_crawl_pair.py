"""Two trees' crawls side by side, at the same time: CPU a page of one against the other.

    .venv/bin/python bench/run_crawl_pair.py --old /tmp/wt-base --new /tmp/wt-head \\
        [--hosts 1000] [--pages 39] [--rounds 2] [--out DIR]

On a machine whose speed drifts within minutes (bench/RESULTS.md, session 43: the same
commit 0.88 and 1.02 CPU-s per 1,000 pages in runs minutes apart), runs of one tree
after the other compare the machine with itself. Here each round runs two
``run_crawl_bench.py`` at once, one a tree (``PYTHONPATH``), each on a web of its own
(``--hosts`` hosts on ports 8940 and 8941, work directories pair1 and pair2), so a
drift hits both alike; the next round swaps the trees' ports. Each run's report goes to
``--out`` (``<round>-old.json``, ``<round>-new.json``); the summary prints the
ratio new / old of CPU-s per 1,000 pages for each round and their mean, and of the
parser processes' and the loop's CPU.

The two crawls share the two cores: with 1,000 hosts each (2,000 requests/s together at
1 request/s per host) the machine is saturated, and a crawl beside another costs less
CPU a page than alone (RESULTS, session 42); ``--hosts 600`` leaves the cores some
idle time. The figures compare trees, they are not the benchmark's absolute ones.
Two runs of the same tree this way: 1.2 to 2.2 % apart (session 43), so a difference
needs several rounds, all one way, and more than ~2 %, to be read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTS = (8940, 8941)


def _run(tree: Path, port: int, slot: int, args: argparse.Namespace, out: Path) -> subprocess.Popen:
    cmd = [
        str(ROOT / ".venv/bin/python"), str(ROOT / "bench/run_crawl_bench.py"),
        "--hosts", str(args.hosts), "--pages", str(args.pages), "--port", str(port),
        "--work", str(ROOT / f"bench/work/pair{slot}"), "--json-out", str(out),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    with out.with_suffix(".log").open("w") as log:  # the child has its own copy
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout (built)")
    parser.add_argument("--new", type=Path, required=True, help="another checkout (built)")
    parser.add_argument("--hosts", type=int, default=1000, help="hosts of each crawl's web")
    parser.add_argument("--pages", type=int, default=39)
    parser.add_argument("--rounds", type=int, default=2, help="each round swaps the ports")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/work/pair")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # Two run_crawl_bench.py at once would both install nginx when it is missing.
    subprocess.run(["bash", str(ROOT / "bench/nginx.sh"), "install"], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    ratios: dict[str, list[float]] = {"all": [], "parser": [], "loop": []}
    for round_ in range(1, args.rounds + 1):
        trees = [("old", args.old), ("new", args.new)]
        if round_ % 2 == 0:
            trees.reverse()
        runs = [
            _run(tree, port, slot, args, args.out / f"{round_}-{name}.json")
            for slot, ((name, tree), port) in enumerate(zip(trees, PORTS, strict=True), 1)
        ]
        if any([run.wait() for run in runs]):  # a list: wait for both
            sys.exit(f"round {round_}: a crawl failed (logs in {args.out})")
        old, new = (
            json.loads((args.out / f"{round_}-{n}.json").read_text()) for n in ("old", "new")
        )
        pages_old, pages_new = old["pages_stored"], new["pages_stored"]
        parts = {
            "all": ("cpu_s_per_1k_pages", 1, 1),
            "parser": ("cpu_s_other_processes", pages_old, pages_new),
            "loop": ("cpu_s_event_loop_thread", pages_old, pages_new),
        }
        for part, (key, n_old, n_new) in parts.items():
            ratios[part].append((new[key] / n_new) / (old[key] / n_old))
        print(
            f"round {round_}: old {old['cpu_s_per_1k_pages']} ({old['code']['commit']}),"
            f" new {new['cpu_s_per_1k_pages']} ({new['code']['commit']}) CPU-s per 1,000 pages;"
            f" new / old {ratios['all'][-1]:.3f}"
        )
    summary = ", ".join(f"{part} {statistics.mean(values):.3f}" for part, values in ratios.items())
    print(f"mean ratio new / old over {args.rounds} rounds: {summary}")


if __name__ == "__main__":
    main()
