"""MinHash sketches: an estimate of two texts' Jaccard similarity. Pure, no I/O.

Why: a SimHash within 3 bits is a candidate, not a proof. SimHash estimates
the angle between two shingle vectors, and a few phrases repeated hundreds of
times can set most of its 64 bits: the Python docs' ``genindex-*.html`` pages
(long lists of "(in module os)", "(class in ctypes)") came out 2-3 bits apart
while sharing 2-5% of their word 3-shingles. ``ContentDedup`` (dedup.py)
flags a candidate only when the Jaccard similarity of the two texts' sets of
word 3-shingles, estimated from these sketches, is at least
``NEAR_DUPLICATE_JACCARD``.

The sketch is a bottom-k MinHash (Broder, "On the resemblance and containment
of documents", 1997; Cohen and Kaplan, "Summarizing data using bottom-k
sketches", PODC 2007): each distinct shingle is hashed once, and the sketch
keeps the 64 smallest hashes. The 64 smallest hashes of the union of two
texts are among those of their two sketches, and each of them is in both
texts with probability J, so the share found in both sketches estimates J;
the standard error is about sqrt(J(1-J)/64): 0.017 at J = 0.98 (one word
changed in 300), 0.045 at 0.85. A text of fewer than 64 distinct shingles
keeps all of them, and the estimate is its exact J.

A hash is the top 32 bits of simhash.py's 64-bit shingle hash (its lane
arithmetic). Among the 64 smallest of a 20,000-word text, two distinct
shingles share those 32 bits about once in 7,000 texts; the sketch then
keeps 63, which moves an estimate by about 1/64. The sketch is the kept
hashes in increasing order, 4 bytes each, little-endian: at most 256 bytes.

Chosen after measuring (bench/bench_neardup.py, bench/RESULTS.md): one
permutation hashing (64 bins, Li, Owen and Zhang, NIPS 2012) would fit in
128 bytes, but finding each bin's minimum needs a sort of all the hashes,
~0.4 ms for a 2,000-word page against ~0.13 ms for ``heapq.nsmallest`` (now the
hashes come sorted: the sketch is their first 64).
``datasketch.MinHash`` with 64 permutations (SHA-1 per shingle, numpy) took
2.3 ms per git-doc page on its own, against 1.2 ms for all of outcome.py's
fingerprints (text hash, SimHash and this sketch), and would add numpy and
scipy to the dependencies.
"""

from __future__ import annotations

import struct

import numpy as np

from trawler import simhash as _simhash
from trawler.simhash import distinct_shingle_hashes, first_of_runs, simhash_of_hashes, words

SKETCH_SIZE = 64  # hashes kept
SKETCH_MAX_BYTES = 4 * SKETCH_SIZE
SHINGLE_WORDS = 3
# Flag a near-duplicate at an estimated Jaccard similarity of at least this.
NEAR_DUPLICATE_JACCARD = 0.9
_32 = np.uint64(32)


def sketch(text: str) -> bytes | None:
    """The MinHash sketch of the text's word 3-shingles; None for a text without words.

    A text shorter than three words is one shingle of all its words.
    """
    return fingerprints(text)[1]


def fingerprints(text: str) -> tuple[int, bytes | None]:
    """The SimHash and the sketch of the text's word 3-shingles, hashed once for both:
    in C when it is built (``simhash.native``), else in numpy."""
    if _simhash.native is not None:
        return _simhash.native_fingerprints(text, SHINGLE_WORDS)
    shingles = distinct_shingle_hashes(words(text), SHINGLE_WORDS)
    return simhash_of_hashes(shingles), sketch_of_hashes(shingles)


def sketch_of_hashes(hashes: np.ndarray) -> bytes | None:
    """The sketch of distinct shingle hashes, sorted (``simhash.distinct_shingle_hashes``)."""
    if not len(hashes):
        return None
    top = hashes[:SKETCH_SIZE] >> _32  # the smallest, in increasing order
    kept = top[first_of_runs(top)]  # two may share 32 bits
    return kept.astype("<u4").tobytes()


def similarity(a: bytes, b: bytes) -> float:
    """Estimated Jaccard similarity of the texts of two sketches (0.0 to 1.0).

    ValueError if either is not a sketch.
    """
    x, y = set(_hashes(a)), set(_hashes(b))
    union = sorted(x | y)[:SKETCH_SIZE]  # the smallest hashes of the union of the texts
    return sum(value in x and value in y for value in union) / len(union)


def is_sketch(data: bytes) -> bool:
    return 0 < len(data) <= SKETCH_MAX_BYTES and len(data) % 4 == 0


def _hashes(data: bytes) -> tuple[int, ...]:
    if not is_sketch(data):
        raise ValueError(f"a sketch is 4 to {SKETCH_MAX_BYTES} bytes, a multiple of 4: {len(data)}")
    return struct.unpack(f"<{len(data) // 4}I", data)
