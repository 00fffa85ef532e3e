"""Fingerprint micro-benchmark: CPU µs a page for a page's SimHash and MinHash sketch.

    flock /tmp/cpu.lock .venv/bin/python bench/bench_fingerprint.py [--hosts 40] [--rounds 7]

The main texts of the crawl benchmark's pages (bench/bench_parsepool.py's pages, parsed
once, outside the timing), each through what outcome.py runs on it, three ways,
alternating within each round: ``numpy`` (``words``, ``distinct_shingle_hashes``,
``simhash_of_hashes``, ``sketch_of_hashes``), ``c_words`` (``words`` in Python, the
rest in one C call) and ``c`` (``native_fingerprints``: ASCII texts cut into words in C
too). ``unicode`` rows: the same texts with one non-ASCII word, so ``c`` takes the
``words`` path. Thread CPU time, median of the rounds; the values are checked equal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))  # bench_parsepool, for its pages

from bench_parsepool import benchmark_pages  # noqa: E402

from trawler import simhash as simhash_module  # noqa: E402
from trawler.minhash import SHINGLE_WORDS, sketch_of_hashes  # noqa: E402
from trawler.parse import parse_html  # noqa: E402
from trawler.simhash import distinct_shingle_hashes, simhash_of_hashes, words  # noqa: E402

Way = Callable[[str], tuple[int, bytes | None]]


def numpy_way(text: str) -> tuple[int, bytes | None]:
    shingles = distinct_shingle_hashes(words(text), SHINGLE_WORDS)
    return simhash_of_hashes(shingles), sketch_of_hashes(shingles)


def c_words_way(text: str) -> tuple[int, bytes | None]:
    return simhash_module.native.of_words(words(text), SHINGLE_WORDS)


def c_way(text: str) -> tuple[int, bytes | None]:
    return simhash_module.native_fingerprints(text, SHINGLE_WORDS)


WAYS: dict[str, Way] = {"numpy": numpy_way, "c_words": c_words_way, "c": c_way}


def main_texts(hosts: int) -> list[str]:
    pages, _ = benchmark_pages(hosts)
    texts = []
    for _, result in pages:
        parsed = parse_html(result.body, result.final_url, result.charset)
        if parsed.main_text:
            texts.append(parsed.main_text)
    return texts


def per_page_us(way: Way, texts: list[str]) -> float:
    started = time.thread_time()
    for text in texts:
        way(text)
    return (time.thread_time() - started) * 1e6 / len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if simhash_module.native is None:
        sys.exit("bench_fingerprint: trawler._fingerprint is not built (pip install -e .)")
    ascii_texts = main_texts(args.hosts)
    sets = {"ascii": ascii_texts, "unicode": [f"café {text}" for text in ascii_texts]}
    words_a_page = statistics.mean(len(words(text)) for text in ascii_texts)
    print(f"{len(ascii_texts)} texts, {words_a_page:.0f} words a page")
    for name, texts in sets.items():
        for text in texts[:200]:  # same values every way
            assert len({way(text) for way in WAYS.values()}) == 1, text[:80]
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(args.rounds + 1):
            for way, function in WAYS.items():
                times[way].append(per_page_us(function, texts))
        for way, costs in times.items():
            spread = f"{min(costs[1:]):.1f}-{max(costs[1:]):.1f}"
            print(f"{name:8} {way:8} {statistics.median(costs[1:]):7.2f} µs a page ({spread})")


if __name__ == "__main__":
    main()
