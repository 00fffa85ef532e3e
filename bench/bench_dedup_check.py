"""What content dedup costs the writer thread: ``ContentDedup.check`` per page.

    .venv/bin/python bench/bench_dedup_check.py [--hosts 2000] [--pages 39]
        [--random-size 1000000] [--repeat 3] [--cache bench/work/dedup_pages.pickle]

Two shapes:

1. The crawl benchmark's web (trawler.sitegen, what bench/make_nginx_site.py
   writes): every reachable URL of every host, through the analysis code the
   crawl runs (``outcome.page_outcome``: text hash, SimHash, MinHash sketch),
   in crawl order (politeness keeps the hosts in step: each host's pages in
   breadth-first order, the hosts interleaved). One template and a 70-word
   vocabulary: the fingerprints cluster, and the index's buckets grow long.
   Then ``ContentDedup.check`` over all of them, CPU time per page (median of
   ``--repeat``), the positions in the buckets a lookup probes (what the
   index has to test), the candidates it returns, and a digest of the
   verdicts (``duplicate_of`` of every page), which must not change.
2. All distinct, random fingerprints (bench_neardup.py's shape): an index of
   ``--random-size``, ``candidates`` per lookup (half the queries 1-7 bits
   from a stored fingerprint, half random), and ``add`` per fingerprint.

Memory: tracemalloc of the ContentDedup after shape 1 and of the index after
shape 2, per stored page. To compare with another commit, run it on that
commit's package, back to back with this one, e.g.::

    git archive main trawler | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base .venv/bin/python bench/bench_dedup_check.py --cache ...

The pages are built once and kept in ``--cache`` (~40 s to build at 2,000 hosts).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import pickle
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import trawler
from trawler.config import CrawlConfig
from trawler.dedup import CANDIDATE_BITS, ContentDedup
from trawler.outcome import page_outcome
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.simhash_index import SimHashIndex, _blocks
from trawler.sitegen import Site, SiteSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling bench modules

from neardup_costs import lookup_probes  # noqa: E402

Row = tuple[str, str | None, str | None, bytes | None]  # url, text_hash, simhash, minhash


def crawl_order(site: Site) -> list[tuple[str, int]]:
    """(URL, depth) of every reachable URL: each host breadth-first, the hosts in step."""
    per_host = [list(site.reachable([site.base(i) + "/"]).items()) for i in range(site.spec.hosts)]
    longest = max(map(len, per_host))
    return [urls[step] for step in range(longest) for urls in per_host if step < len(urls)]


def build_rows(hosts: int, pages: int) -> list[Row]:
    site, config = Site(SiteSpec(hosts=hosts, pages=pages)), CrawlConfig()
    rows = []
    for url, depth in crawl_order(site):
        i, path = site._split(url)
        assert i is not None
        response = site.page(i, path)
        assert response is not None
        content_type, _, _ = response.content_type.partition(";")
        result = FetchResult(url, url, 200, content_type=content_type, charset="utf-8",
                             body=response.body, raw_body=response.body)  # fmt: skip
        page = page_outcome(CrawlRequest(url, depth), result, config, config.robots_token).page
        rows.append((page.url, page.text_hash, page.simhash, page.minhash))
    return rows


def load_rows(hosts: int, pages: int, cache: Path | None) -> list[Row]:
    if cache is not None and cache.exists():
        cached = pickle.loads(cache.read_bytes())
        if cached["shape"] == [hosts, pages]:
            return cached["rows"]
    rows = build_rows(hosts, pages)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps({"shape": [hosts, pages], "rows": rows}))
    return rows


def page_record(row: Row) -> PageRecord:
    url, exact, near, sketch = row
    return PageRecord(url, url, 200, "text/html", 0, 0, None, None, None, None, None, 0, None,
                      0.0, 0.0, None, text_hash=exact, simhash=near, minhash=sketch)  # fmt: skip


def cpu_us(run: Callable[[], object], count: int, repeat: int) -> float:
    """Median CPU µs per item of ``run`` (which handles ``count`` items)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return statistics.median(times) / count * 1e6


def check_all(rows: list[Row]) -> tuple[ContentDedup, list[PageRecord]]:
    dedup, pages = ContentDedup(), [page_record(row) for row in rows]
    for page in pages:
        dedup.check(page)
    return dedup, pages


def traced_bytes(build: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    kept = build()
    size, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size


def probed_entries(fingerprints: list[int], k: int = 3) -> float:
    """Mean positions in the buckets a multi-probe lookup reads (with repeats), each
    fingerprint looked up before it is added: what the data makes the index test,
    whatever the index's implementation."""
    blocks = _blocks(k + 1)
    tables: list[dict[int, int]] = [{} for _ in blocks]
    total = 0
    for fingerprint in fingerprints:
        for (shift, mask), table in zip(blocks, tables, strict=True):
            block = (fingerprint >> shift) & mask
            probes = [block] + [block ^ (1 << bit) for bit in range(mask.bit_length())]
            total += sum(table.get(probe, 0) for probe in probes)
            table[block] = table.get(block, 0) + 1
    return total / max(1, len(fingerprints))


def bench_shape(rows: list[Row], repeat: int) -> dict:
    html = [row for row in rows if row[2] is not None]
    fingerprints = [int(row[2], 16) for row in html if row[2] is not None]
    _, pages = check_all(rows)
    verdicts = "\n".join(f"{p.url} {p.duplicate_of}" for p in pages)
    found, index = 0, SimHashIndex(3)
    for position, fingerprint in enumerate(fingerprints):
        found += len(index.candidates(fingerprint, CANDIDATE_BITS))
        index.add(fingerprint, str(position))
    records = [[page_record(row) for row in rows] for _ in range(repeat)]

    def check_once() -> None:
        dedup = ContentDedup()
        for page in records.pop():
            dedup.check(page)

    return {
        "pages": len(rows),
        "html_pages": len(html),
        "check_us_per_page": round(cpu_us(check_once, len(rows), repeat), 2),
        "probed_entries_per_lookup": round(probed_entries(fingerprints), 1),
        "candidates_per_lookup": round(found / max(1, len(fingerprints)), 4),
        "duplicates": sum(p.duplicate_of is not None for p in pages),
        "verdicts_sha256": hashlib.sha256(verdicts.encode()).hexdigest()[:16],
        "dedup_bytes_per_html_page": round(traced_bytes(lambda: check_all(rows)[0]) / len(html), 1),
    }


def random_shape(size: int, repeat: int, queries: int = 2000) -> dict:
    rng = random.Random(5)
    stored = [rng.getrandbits(64) for _ in range(size)]
    pairs = [(fingerprint, str(i)) for i, fingerprint in enumerate(stored)]
    index = SimHashIndex(3)
    add_us = cpu_us(lambda: index.load(pairs), size, 1)
    probes = lookup_probes(rng, stored, queries)
    answers = [index.candidates(query, CANDIDATE_BITS) for query in probes]
    lookup_us = cpu_us(lambda: [index.candidates(q, CANDIDATE_BITS) for q in probes],
                       len(probes), repeat)  # fmt: skip

    def build() -> SimHashIndex:
        built = SimHashIndex(3)
        built.load(pairs)
        return built

    return {
        "size": size,
        "candidates_us_per_lookup": round(lookup_us, 2),
        "add_us": round(add_us, 2),
        "answers_sha256": hashlib.sha256(repr(answers).encode()).hexdigest()[:16],
        "index_bytes_per_fingerprint": round(traced_bytes(build) / size, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=39)
    parser.add_argument("--random-size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    rows = load_rows(args.hosts, args.pages, args.cache)
    report = {"trawler": str(Path(trawler.__file__).parent)}
    report["benchmark_web"] = bench_shape(rows, args.repeat)
    if args.random_size:
        report["random"] = random_shape(args.random_size, args.repeat)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
