"""CPU per page of the embedded frontier's event-loop side: lease, politeness, seen set.

What the crawl loop asks of the frontier for each page, in memory (no database:
the disk side runs on the writer thread): ``next()`` leases a URL,
``record_sent``/``record_response``/``finish_host`` keep its host's pace,
``filter_new`` checks the page's links against the seen set, ``enqueue`` and
``ack`` schedule the new ones. The web is shaped like the crawl benchmark's
(``--hosts`` hosts of ``--pages`` pages, each page linking to ``--links`` pages
of its host, most of them seen already), with no delay, so nothing waits.

For each Trawler source tree (``--src``, e.g. the main checkout for "before"
and this one for "after") a process imports that tree and crawls the web;
trees run in turn, ``--repeat`` rounds, and the median CPU time
(``time.process_time``) per page is reported.

    .venv/bin/python bench/bench_frontier_loop.py --src /work/main --src .
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


async def _crawl(hosts: int, pages: int, links: int) -> dict[str, float]:
    import trawler
    from trawler.dedup import url_fingerprint
    from trawler.frontier.sqlite import SqliteFrontier
    from trawler.politeness import PolitenessPolicy
    from trawler.records import CrawlRequest

    def request(host: int, page: int, depth: int) -> CrawlRequest:
        name = f"127.0.{host // 250 + 1}.{host % 250 + 1}"
        url = f"http://{name}/p/{page}.html"
        return CrawlRequest(url, depth, None, name, url_fingerprint(url))

    # Built before the clock starts: the crawl's parser processes build them.
    web = {(h, p): request(h, p, 1) for h in range(hosts) for p in range(pages)}
    at = {r.url: key for key, r in web.items()}
    frontier = SqliteFrontier(PolitenessPolicy(0.0))
    seeds = [request(h, 0, 0) for h in range(hosts)]
    done = 0
    cpu = time.process_time()
    frontier.enqueue(await frontier.filter_new(seeds))
    while (leased := await frontier.next()) is not None:
        host = leased.host
        frontier.record_sent(host, time.monotonic())
        frontier.record_response(host, 200, None, None)
        await frontier.finish_host(host)
        index, number = at[leased.url]
        found = [web[index, (number + k) % pages] for k in range(links)]
        frontier.enqueue(await frontier.filter_new(found))
        frontier.ack(1)
        done += 1
    cpu = time.process_time() - cpu
    assert done == hosts * pages, done
    return {
        "cpu_us_per_page": cpu / done * 1e6,
        "pages": done,
        "tree": str(Path(trawler.__file__).parent.parent),
    }


def _measure(src: Path, hosts: int, pages: int, links: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    args = [sys.executable, __file__, "--child", "--hosts", str(hosts), "--pages", str(pages)]
    args += ["--links", str(links)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, help="a Trawler source tree")
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=39)
    parser.add_argument("--links", type=int, default=20, help="links on each page")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_crawl(args.hosts, args.pages, args.links))))
        return
    trees = args.src or [Path(".")]
    runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    for _ in range(args.repeat):
        for tree in trees:  # in turn, so both see the same machine load
            runs[tree].append(_measure(tree, args.hosts, args.pages, args.links))
    for tree, results in runs.items():
        assert results[0]["tree"] == str(tree.resolve()), results[0]["tree"]
        cpu = [r["cpu_us_per_page"] for r in results]
        shown = ", ".join(f"{c:.1f}" for c in cpu)
        print(f"{str(tree):40} CPU/page median {statistics.median(cpu):6.1f} µs (runs {shown})")


if __name__ == "__main__":
    main()
