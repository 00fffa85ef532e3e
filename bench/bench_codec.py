"""How a parser process's answers and batches cross the pipe: pickle against marshal.

    .venv/bin/python bench/bench_codec.py [--hosts 40] [--batch 8] [--repeat 5]

The crawl benchmark's pages (bench_parsepool.benchmark_pages) are analysed inline;
their answers (analysis_codec.flatten_analysis) and the batches sent for them
(analysis_codec.page_item) are written and read in batches of ``--batch`` pages, as
parserpipe.py does: bytes a page, and µs a page to write and to read (best of
``--repeat``).
"""

from __future__ import annotations

import argparse
import marshal
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_parsepool
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from bench_parsepool import benchmark_pages  # noqa: E402

from trawler.analysis import AnalysisPool, analyse  # noqa: E402
from trawler.analysis_codec import flatten_analysis, page_item  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402

PROTOCOL = pickle.HIGHEST_PROTOCOL


def best_us(function: Callable[[Any], object], values: list, pages: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for value in values:
            function(value)
        best = min(best, time.perf_counter() - started)
    return best / pages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    pages, hosts = benchmark_pages(args.hosts)
    pool = AnalysisPool(CrawlConfig(), 0)
    pool.start(hosts)
    answers = [flatten_analysis(analyse(pool.analyser, r, result)) for r, result in pages]
    items = [page_item(r, result) for r, result in pages]
    n, size = len(pages), args.batch
    print(f"{n} pages, batches of {size}; a page: bytes, µs to write, µs to read")
    print("| what | codec | bytes | write | read |\n|---|---|---:|---:|---:|")
    for what, values in (("answers", answers), ("batches", items)):
        batches = [(True, values[i : i + size]) for i in range(0, n, size)]
        codecs = (
            ("pickle", lambda v: pickle.dumps(v, protocol=PROTOCOL), pickle.loads),
            ("marshal", marshal.dumps, marshal.loads),
        )
        for name, dumps, loads in codecs:
            written = [dumps(batch) for batch in batches]
            print(f"| {what} | {name} | {sum(map(len, written)) / n:,.0f} "
                  f"| {best_us(dumps, batches, n, args.repeat):.2f} "
                  f"| {best_us(loads, written, n, args.repeat):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
