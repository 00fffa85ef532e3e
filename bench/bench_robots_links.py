"""CPU per page of the crawl loop's robots.txt check of a page's links (RobotsGate.allows).

The web is the crawl benchmark's shape: ``--hosts`` origins whose robots.txt is
held (``Disallow: /private/``), ``--pages`` pages each, every page linking to
``--links`` pages of its own host (bench_parsepool's pages: 8.3 links a page
reach this check), the pages taken host after host in turn as the crawl takes
them (the first page of every host, then the second, ...). For each source
tree (``--src``) a process imports that tree, fills the gate's entries directly
(its private ``_entries``: no robots.txt is fetched) and checks every link;
trees run in turn, ``--repeat`` rounds, and the median CPU per page is reported.

    .venv/bin/python bench/bench_robots_links.py --src /work/main --src .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def _child(hosts: int, pages: int, links: int) -> dict[str, object]:
    import trawler
    from trawler.robots import parse
    from trawler.robotscache import RobotsEntry
    from trawler.robotsgate import RobotsGate

    gate = RobotsGate(None, "trawler", (1.0,), Counter(), None, None)  # type: ignore[arg-type]
    rules = parse(b"User-agent: *\nDisallow: /private/\n", "trawler")
    names = [f"127.0.{h // 250 + 1}.{h % 250 + 1}" for h in range(hosts)]
    for name in names:
        gate._entries[f"http://{name}"] = RobotsEntry(rules, time.monotonic(), 200)
    web = [
        [f"http://{name}/p/{(page + k) % pages}.html" for k in range(links)]
        for page in range(pages)
        for name in names
    ]
    cpu = time.process_time()
    for found in web:
        for url in found:
            gate.allows(url)
    cpu = time.process_time() - cpu
    return {
        "cpu_us_per_page": cpu / len(web) * 1e6,
        "tree": str(Path(trawler.__file__).parent.parent),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, help="a Trawler source tree")
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=39)
    parser.add_argument("--links", type=int, default=8, help="links on each page")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.hosts, args.pages, args.links)))
        return
    trees = args.src or [Path(".")]
    runs: dict[Path, list[float]] = {tree: [] for tree in trees}
    command = [sys.executable, __file__, "--child", "--hosts", str(args.hosts)]
    command += ["--pages", str(args.pages), "--links", str(args.links)]
    for _ in range(args.repeat):
        for tree in trees:  # in turn, so both see the same machine load
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            assert result["tree"] == str(tree.resolve()), result["tree"]
            runs[tree].append(result["cpu_us_per_page"])
    for tree, cpu in runs.items():
        shown = ", ".join(f"{c:.1f}" for c in cpu)
        print(f"{str(tree):40} CPU/page median {statistics.median(cpu):6.1f} µs (runs {shown})")


if __name__ == "__main__":
    main()
