"""The near-duplicate benchmark's measures of cost (bench_neardup.py, steps 5 and 6):
CPU per page of the fingerprints, before and now, and of an index lookup; and the
word shingles and the previous SimHash rule both steps share with the scoring.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

from trawler.dedup import CANDIDATE_BITS
from trawler.minhash import SHINGLE_WORDS, sketch_of_hashes
from trawler.simhash import (
    _majority,
    distinct_shingle_hashes,
    shingle_hashes,
    simhash_of_hashes,
    text_hash,
    words,
)
from trawler.simhash_index import SimHashIndex

PREVIOUS_SHINGLE_WORDS = 2  # word pairs, before sketches


def shingles(tokens: list[bytes]) -> set[bytes]:
    width = min(3, len(tokens))
    return {b" ".join(tokens[i : i + width]) for i in range(len(tokens) - width + 1)}


def counted_simhash(text: str, shingle_words: int = PREVIOUS_SHINGLE_WORDS) -> int:
    """The previous SimHash: every occurrence of a shingle votes."""
    tokens = words(text)
    if not tokens:
        return 0
    width = min(shingle_words, len(tokens))
    count = len(tokens) - width + 1
    return _majority(shingle_hashes(tokens, width, count), count)


def cpu_per_page_us(texts: list[str], fingerprint: Callable[[str], object]) -> float:
    best = math.inf
    for _ in range(3):
        started = time.process_time()
        for text in texts:
            fingerprint(text)
        best = min(best, time.process_time() - started)
    return best / len(texts) * 1e6


def fingerprints_now(text: str) -> tuple:
    """What outcome.py computes for a page's main text."""
    shingles = distinct_shingle_hashes(words(text), SHINGLE_WORDS)
    return text_hash(text), simhash_of_hashes(shingles), sketch_of_hashes(shingles)


def fingerprint_costs(texts: list[str]) -> dict[str, float]:
    costs = {
        "before": cpu_per_page_us(texts, lambda t: (text_hash(t), counted_simhash(t))),
        "now": cpu_per_page_us(texts, fingerprints_now),
    }
    try:
        from datasketch import MinHash  # optional: only to compare
    except ImportError:
        return costs

    def datasketch_minhash(text: str) -> object:
        minhash = MinHash(num_perm=64)
        minhash.update_batch(list(shingles(words(text))))
        return minhash

    costs["datasketch MinHash(64) alone"] = cpu_per_page_us(texts, datasketch_minhash)
    return costs


def lookup_probes(rng: random.Random, stored: list[int], queries: int) -> list[int]:
    """Fingerprints to look up: half 1-7 bits from a stored one, half random."""
    near = []
    for _ in range(queries // 2):
        fingerprint = rng.choice(stored)
        for bit in rng.sample(range(64), rng.randint(1, 7)):
            fingerprint ^= 1 << bit
        near.append(fingerprint)
    return near + [rng.getrandbits(64) for _ in range(queries - len(near))]


def lookup_cost_us(size: int, queries: int = 2000) -> dict[str, float]:
    """``candidates`` (multi-probe, up to CANDIDATE_BITS) against ``find`` (k = 3 only),
    per lookup, in an index of ``size`` random fingerprints; half the queries are
    1-7 bits from a stored one, half random."""
    rng = random.Random(5)
    index = SimHashIndex(3)
    stored = [rng.getrandbits(64) for _ in range(size)]
    index.load((fingerprint, str(i)) for i, fingerprint in enumerate(stored))
    probes = lookup_probes(rng, stored, queries)
    costs = {}
    lookups: dict[str, Callable[[int], object]] = {
        "find": index.find,
        "candidates": lambda query: index.candidates(query, CANDIDATE_BITS),
    }
    for name, lookup in lookups.items():
        started = time.process_time()
        for query in probes:
            lookup(query)
        costs[name] = (time.process_time() - started) / len(probes) * 1e6
    return costs
