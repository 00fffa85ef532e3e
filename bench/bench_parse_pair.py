"""Paired benchmark of ``parse_html``: another tree's parse.py against this tree's, page by page.

    .venv/bin/python bench/bench_parse_pair.py --old /tmp/wt-base/trawler/parse.py [--hosts 40]

On a machine whose speed drifts by 2x within minutes (bench/RESULTS.md, session 43),
timing one tree, then the other, compares the machine with itself. Here both
``parse_html`` run in one process on the same page one after the other, their order
alternating page by page and round by round, so a drift hits both alike. The other
tree's parse.py is loaded from its file under another name; what it imports comes from
this tree, so only changes inside parse.py are compared. Pages: the crawl benchmark's
(bench_parsepool.benchmark_pages). Prints CPU µs per page (thread time) of each, the
first round left out as warm-up.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_parsepool
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # run from a checkout


def main() -> None:
    parser = argparse.ArgumentParser(description="parse_html of two parse.py, page by page")
    parser.add_argument("--old", type=Path, required=True, help="the other tree's parse.py")
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    from bench_parsepool import benchmark_pages

    from trawler import parse as new

    spec = importlib.util.spec_from_file_location("parse_old", args.old)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    pages, _ = benchmark_pages(args.hosts)
    items = [(result.body, request.url) for request, result in pages]
    spent = {old: 0.0, new: 0.0}
    clock = time.thread_time
    for round_ in range(args.rounds):
        for i, (body, url) in enumerate(items):
            for module in (old, new) if (i + round_) % 2 else (new, old):
                started = clock()
                module.parse_html(body, url)
                if round_:
                    spent[module] += clock() - started
    count = (args.rounds - 1) * len(items)
    before, after = (spent[module] * 1e6 / count for module in (old, new))
    print(
        f"{len(items)} pages × {args.rounds - 1} rounds: {args.old} {before:.1f} µs a page,"
        f" this tree {after:.1f}: {after - before:+.1f} ({(after / before - 1) * 100:+.1f} %)"
    )


if __name__ == "__main__":
    main()
