"""The content fingerprints computed in numpy equal the ones computed before.

SimHash and MinHash values are stored (dedup.py compares new pages with them,
resumed crawls included): ``distinct_shingle_hashes``, ``simhash_of_hashes`` and
``sketch_of_hashes`` must give, for any text, what the big-integer lanes
(``shingle_hashes``, ``_majority``) and ``heapq.nsmallest`` gave. The reference
below is that code as it was.
"""

from __future__ import annotations

import heapq
import struct
from array import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trawler.minhash import SKETCH_SIZE, sketch, sketch_of_hashes
from trawler.simhash import (
    _majority,
    distinct_shingle_hashes,
    shingle_hashes,
    simhash,
    simhash_of_hashes,
    words,
)


def reference_hashes(tokens: list[bytes], shingle_words: int) -> array:
    width = min(shingle_words, len(tokens))
    count = len(tokens) - width + 1
    lanes = array("Q")
    lanes.frombytes(shingle_hashes(tokens, width, count).to_bytes(8 * count, "little"))
    return array("Q", set(lanes))


def reference_simhash(hashes: array) -> int:
    return _majority(int.from_bytes(hashes.tobytes(), "little"), len(hashes)) if hashes else 0


def reference_sketch(hashes: array) -> bytes | None:
    if not hashes:
        return None
    kept = sorted({value >> 32 for value in heapq.nsmallest(SKETCH_SIZE, hashes)})
    return struct.pack(f"<{len(kept)}I", *kept)


def assert_same(tokens: list[bytes], shingle_words: int = 3) -> None:
    want = reference_hashes(tokens, shingle_words) if tokens else array("Q")
    have = distinct_shingle_hashes(tokens, shingle_words)
    assert have.tolist() == sorted(want)
    assert simhash_of_hashes(have) == reference_simhash(want)
    assert sketch_of_hashes(have) == reference_sketch(want)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "harbour", "ü", "x1", "日本", "z", "quay"]), max_size=400),
    st.integers(1, 8),
)
def test_equal_to_the_big_integer_lanes_on_any_text(text: list[str], shingle_words: int) -> None:
    assert_same(words(" ".join(text)), shingle_words)


def test_equal_on_long_texts_past_a_chunk_of_votes() -> None:
    """70,000 distinct shingles: the votes are counted in two chunks."""
    rng = np.random.default_rng(3)
    tokens = [b"w%d" % n for n in rng.integers(0, 5_000, 70_002)]
    assert len(distinct_shingle_hashes(tokens)) > 1 << 16
    assert_same(tokens)


def test_pinned_values() -> None:
    """Values stored by earlier versions (computed with the big-integer lanes)."""
    text = "The quick brown fox jumps over the lazy dog"
    assert f"{simhash(text):016x}" == f"{reference_simhash(reference_hashes(words(text), 3)):016x}"
    assert f"{simhash(text):016x}" == "1a29ea1fef282c16"
    one = sketch(text)
    assert one is not None and one.hex()[:40] == "e7ea630a1450a11456cabe1a6eaa081e0dc68928"
    assert simhash("") == 0 and sketch("") is None
