"""SimHash benchmark: fingerprint speed and index lookups at a million pages.

    .venv/bin/python bench/simhash_bench.py [--size 1000000] [--queries 10000] [--markdown]

Measures ``simhash`` per 5/10/50 KB text, then builds a ``SimHashIndex`` of
``--size`` random 64-bit fingerprints (one in ten with a planted neighbour
1..3 bits away), times ``find`` over ``--queries`` queries (half hits 1..3
bits from a stored fingerprint, half random misses), the build, and the
index's memory (tracemalloc, on a second build so tracing does not slow the
timed one). ``--markdown`` prints a section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from trawler.simhash import simhash
from trawler.simhash_index import SimHashIndex


def _text(rng: random.Random, size_bytes: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(5000)]
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]
    words = rng.choices(vocabulary, weights, k=size_bytes // 4)
    return " ".join(words)[:size_bytes]


def _per_call_us(function: Callable[[], object], repeat: int) -> float:
    function()
    started = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - started) / repeat * 1e6


def _near(rng: random.Random, fingerprint: int) -> int:
    for bit in rng.sample(range(64), rng.randint(1, 3)):
        fingerprint ^= 1 << bit
    return fingerprint


def _pairs(size: int, seed: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(size):
        fingerprint = rng.getrandbits(64) if i % 10 or not pairs else _near(rng, pairs[-1][0])
        pairs.append((fingerprint, f"https://host{i % 5000}.example/section/page-{i}.html"))
    return pairs


def _build(pairs: list[tuple[int, str]]) -> tuple[SimHashIndex, float]:
    started = time.perf_counter()
    index = SimHashIndex(3)
    index.load(pairs)
    return index, time.perf_counter() - started


def _index_bytes(pairs: list[tuple[int, str]]) -> int:
    gc.collect()
    tracemalloc.start()
    index, _ = _build(pairs)
    size, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return size


def _lookups(index: SimHashIndex, pairs: list[tuple[int, str]], count: int) -> dict:
    rng = random.Random(2)
    hits = [_near(rng, rng.choice(pairs)[0]) for _ in range(count // 2)]
    misses = [rng.getrandbits(64) for _ in range(count - count // 2)]
    results: dict = {}
    for name, queries in (("hit", hits), ("miss", misses)):
        started = time.perf_counter()
        found = sum(index.find(q) is not None for q in queries)
        results[name] = ((time.perf_counter() - started) / len(queries) * 1e6, found / len(queries))
    return results


def run(size: int, queries: int) -> dict:
    rng = random.Random(1)
    report: dict = {"simhash_us": {}}
    for kb in (5, 10, 50):
        text = _text(rng, kb * 1024)
        report["simhash_us"][kb] = _per_call_us(lambda t=text: simhash(t), 300 if kb < 50 else 60)
    pairs = _pairs(size, seed=3)
    keys_bytes = sum(len(key) + 49 for _, key in pairs)  # sys.getsizeof of an ASCII str
    index, report["build_s"] = _build(pairs)
    report["lookups"] = _lookups(index, pairs, queries)
    buckets = np.diff(index._offsets)  # the index's layout at k = 3 (simhash_index.py)
    buckets = buckets[buckets > 0]
    report["bucket_mean"], report["bucket_max"] = float(buckets.mean()), int(buckets.max())
    del index
    report["index_bytes"] = _index_bytes(pairs)
    report["keys_bytes"] = keys_bytes
    report["size"], report["queries"] = size, queries
    return report


def markdown(r: dict) -> str:
    n = r["size"]
    hit_us, hit_rate = r["lookups"]["hit"]
    miss_us, miss_rate = r["lookups"]["miss"]
    return "\n".join(
        [
            "## SimHash lookup",
            "",
            f"`bench/simhash_bench.py` (CPython {platform.python_version()}, one core;"
            " k = 3, 4 tables of 16-bit blocks).",
            "",
            "| measure | value |",
            "|---|---|",
            *(
                f"| `simhash` of a {kb} KB text | {us:.0f} µs |"
                for kb, us in r["simhash_us"].items()
            ),
            f"| index size | {n:,} fingerprints (10% with a planted neighbour 1-3 bits away) |",
            f"| build (`load`) | {r['build_s']:.1f} s ({r['build_s'] / n * 1e6:.1f} µs per add) |",
            f"| `find`, hits (1-3 bits away) | {hit_us:.1f} µs per lookup, {hit_rate:.0%} found |",
            f"| `find`, random misses | {miss_us:.1f} µs per lookup, {miss_rate:.2%} found |",
            f"| bucket length | mean {r['bucket_mean']:.1f}, max {r['bucket_max']} |",
            f"| memory: fingerprints, key list, tables | {r['index_bytes'] / 2**20:.0f} MiB"
            f" ({r['index_bytes'] / n:.0f} B per fingerprint) |",
            f"| plus the key strings, unless shared | {r['keys_bytes'] / n:.0f} B per key"
            " (~55-char URLs here) |",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    report = run(args.size, args.queries)
    print(markdown(report) if args.markdown else report)


if __name__ == "__main__":
    main()
