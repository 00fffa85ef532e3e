"""Full-text search on PostgreSQL (issue 17): query latency on a job of ~50k pages,
and what the search column costs the commit.

    nice -n 5 .venv/bin/python bench/bench_pg_search.py [--pages 50000] [--words 300]
        [--runs 5] [--json-out FILE]

A benchmark, not a test. It starts its own PostgreSQL (tests/servers.py) and
stores ``--pages`` pages of one job through the real ``PostgresStore.store_batch``
(2,000 a batch, as the commit), ``--words`` words of text each, drawn from a
20,000-word vocabulary with Zipf weights (1/rank: a few words on most pages,
most words on few), over 100 hosts. The same pages go into a second database
whose ``search_vector`` column (and so its index) was dropped: the difference
is the search index's cost to the commit. Then ANALYZE, and each query of
QUERIES through store/pg_search.py ``search`` (limit 10, snippets included) and
``count_matches``: median and worst of ``--runs`` after one to warm the caches,
in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from tests.servers import start_postgres  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402
from trawler.records import PageRecord  # noqa: E402
from trawler.sitegen import _WORDS  # noqa: E402
from trawler.store import pg_search  # noqa: E402
from trawler.store.postgres import PostgresStore  # noqa: E402

BATCH = 2_000
VOCABULARY = [f"{word}{i}" for i in range(300) for word in _WORDS][:20_000]


def queries() -> dict[str, tuple[str, dict[str, Any]]]:
    """name → (query, filters): words by their Zipf rank, so by how many pages have them."""
    common, middle, rare = VOCABULARY[0], VOCABULARY[40], VOCABULARY[15_000]
    return {
        "common word (rank 1)": (common, {}),
        "mid word (rank 41)": (middle, {}),
        "rare word (rank 15,001)": (rare, {}),
        "two words, AND": (f"{common} {middle}", {}),
        '"a phrase"': (f'"{VOCABULARY[1]} {VOCABULARY[0]}"', {}),
        "prefix*": (VOCABULARY[40][:-1] + "*", {}),
        "common word, -excluded": (f"{common} -{VOCABULARY[2]}", {}),
        "common word, one host": (common, {"host": "h7.bench.test"}),
        "no match": ("nowhereword", {}),
    }


def make_pages(count: int, words: int, seed: int = 17) -> list[PageRecord]:
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))
    pages = []
    for i in range(count):
        host = f"h{i % 100}.bench.test"
        text = " ".join(rng.choices(VOCABULARY, cum_weights=weights, k=words))
        title = " ".join(rng.choices(VOCABULARY, cum_weights=weights, k=4)).title()
        pages.append(PageRecord(
            url=f"http://{host}/p/{i}", final_url=f"http://{host}/p/{i}", status=200,
            content_type="text/html", content_length=len(text) * 2, depth=1, parent_url=None,
            title=title, description=None, keywords=None, text=text, links_count=10,
            content_sha256=None, fetched_at=1_700_000_000.0 + i * 0.01, fetch_duration_s=0.05,
            error=None, host=host,
        ))  # fmt: skip
    return pages


async def store_pages(url: str, pages: list[PageRecord], drop_index: bool) -> tuple[str, float]:
    """(job id, seconds spent in store_batch)."""
    async with await PostgresStore.connect(url) as store:
        if drop_index:
            async with store.pool.connection() as conn:
                await conn.execute("ALTER TABLE pages DROP COLUMN search_vector")
        job = await store.create_job(CrawlConfig(), "running")
        spent = 0.0
        for start in range(0, len(pages), BATCH):
            began = time.perf_counter()
            await store.store_batch(job, pages[start : start + BATCH])
            spent += time.perf_counter() - began
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE pages")
    return job, spent


def time_queries(url: str, job: str, runs: int) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    with psycopg.connect(url) as conn:
        conn.read_only = True
        for name, (query, filters) in queries().items():
            search_ms, count_ms = [], []
            for run in range(runs + 1):
                began = time.perf_counter()
                hits = pg_search.search(conn, job, query, 10, **filters)
                middle = time.perf_counter()
                total = pg_search.count_matches(conn, job, query, **filters)
                ended = time.perf_counter()
                if run:  # the first warms the caches
                    search_ms.append((middle - began) * 1000)
                    count_ms.append((ended - middle) * 1000)
            found[name] = {
                "matches": total, "hits": len(hits),
                "search_ms": statistics.median(search_ms), "search_max_ms": max(search_ms),
                "count_ms": statistics.median(count_ms), "count_max_ms": max(count_ms),
            }  # fmt: skip
            conn.rollback()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    pages = make_pages(args.pages, args.words)
    server = start_postgres()
    try:
        plain_url = server.create_database("bench_plain")
        indexed_url = server.create_database("bench_search")
        _, plain_s = asyncio.run(store_pages(plain_url, pages, drop_index=True))
        job, indexed_s = asyncio.run(store_pages(indexed_url, pages, drop_index=False))
        results = time_queries(indexed_url, job, args.runs)
        with psycopg.connect(indexed_url) as conn:
            sizes = conn.execute(
                "SELECT pg_size_pretty(pg_relation_size('pages_search')),"
                " pg_size_pretty(pg_total_relation_size('pages'))"
            ).fetchone()
    finally:
        server.stop()
    report = {"pages": args.pages, "words": args.words, "store_s_without_search": plain_s,
              "store_s_with_search": indexed_s, "gin_index": sizes[0] if sizes else None,
              "pages_table_total": sizes[1] if sizes else None, "queries": results}  # fmt: skip
    print(f"{args.pages} pages x {args.words} words: store_batch {plain_s:.1f} s without the"
          f" search column, {indexed_s:.1f} s with it; GIN index {report['gin_index']},"
          f" pages table {report['pages_table_total']}")  # fmt: skip
    print("| query | matches | search ms (worst) | count ms (worst) |\n|---|---:|---:|---:|")
    for name, row in results.items():
        print(f"| {name} | {row['matches']:,} | {row['search_ms']:.1f} ({row['search_max_ms']:.1f})"
              f" | {row['count_ms']:.1f} ({row['count_max_ms']:.1f}) |")  # fmt: skip
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
