"""MinHash sketches: an estimate of two texts' Jaccard similarity. Pure, no I/O.

Why: a SimHash within 3 bits is a candidate, not a proof. SimHash estimates
the angle between two shingle vectors, and a few phrases repeated hundreds of
times can set most of its 64 bits: the Python docs' ``genindex-*.html`` pages
(long lists of "(in module os)", "(class in ctypes)") came out 2-3 bits apart
while sharing 2-5% of their word 3-shingles. ``ContentDedup`` (dedup.py)
flags a candidate only when the Jaccard similarity of the two texts' sets of
word 3-shingles, estimated from these sketches, is at least
``NEAR_DUPLICATE_JACCARD``.

The sketch is one permutation hashing (Li, Owen and Zhang, "One Permutation
Hashing", NIPS 2012): each distinct shingle is hashed once to 64 bits, the top
6 bits choose one of 64 bins, and a bin keeps its smallest hash. A bin that is
not empty in both texts holds the same shingle in both with probability J, so
the share of equal bins among them estimates J; the standard error is
sqrt(J(1-J)/64): 0.017 at J = 0.98 (one word changed in 300), 0.045 at 0.85.
Texts of fewer than ~64 shingles mostly get one shingle a bin, and the
estimate is then close to the exact J.

A bin stores 16 bits of its minimum's hash (b-bit minwise hashing, Li and
König, WWW 2010), taken from the 32-bit half that did not order the bin. Two
different minima agree by chance once in 65,535 bins: < 0.001 added to an
estimate. 0 marks an empty bin. A sketch is 128 bytes, little-endian.

Written by hand rather than with ``datasketch``: it reuses the shingle hashes
simhash.py already computes as big-integer lanes, and costs ~0.15 ms for a
10 KB text; ``datasketch.MinHash`` with 64 permutations (numpy,
``update_batch`` of SHA-1 hashed shingles) took ~2 ms for the same text and
would add numpy and scipy to the dependencies (bench/bench_neardup.py).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

from trawler.simhash import shingle_hashes, words

SKETCH_BINS = 64
SKETCH_BYTES = 2 * SKETCH_BINS
SHINGLE_WORDS = 3
# Flag a near-duplicate at an estimated Jaccard similarity of at least this.
NEAR_DUPLICATE_JACCARD = 0.9

_BIN_SHIFT = 64 - (SKETCH_BINS.bit_length() - 1)  # top 6 bits choose the bin
_FORMAT = f"<{SKETCH_BINS}H"


def sketch(text: str) -> bytes | None:
    """The MinHash sketch of the text's word 3-shingles; None for a text without words.

    A text shorter than three words is one shingle of all its words.
    """
    tokens = words(text)
    if not tokens:
        return None
    width = min(SHINGLE_WORDS, len(tokens))
    count = len(tokens) - width + 1
    hashes = array("Q")
    hashes.frombytes(shingle_hashes(tokens, width, count).to_bytes(8 * count, "little"))
    ordered = sorted(hashes)  # C-level; duplicates do not change any bin's minimum
    bins = [0] * SKETCH_BINS
    for bin_number in range(SKETCH_BINS):
        i = bisect_left(ordered, bin_number << _BIN_SHIFT)
        if i < count and ordered[i] >> _BIN_SHIFT == bin_number:
            bins[bin_number] = (ordered[i] & 0xFFFF) or 1  # 0 is kept for "empty"
    return struct.pack(_FORMAT, *bins)


def similarity(a: bytes, b: bytes) -> float:
    """Estimated Jaccard similarity of the texts of two sketches (0.0 to 1.0).

    ValueError if either is not a sketch (``SKETCH_BYTES`` long).
    """
    if len(a) != SKETCH_BYTES or len(b) != SKETCH_BYTES:
        raise ValueError(f"a sketch is {SKETCH_BYTES} bytes, not {len(a)} and {len(b)}")
    matches = empty = 0
    for x, y in zip(struct.unpack(_FORMAT, a), struct.unpack(_FORMAT, b), strict=True):
        if x == y:
            if x:
                matches += 1
            else:
                empty += 1
    used = SKETCH_BINS - empty
    return matches / used if used else 0.0
