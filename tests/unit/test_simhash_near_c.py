"""The C lookup of the SimHash index (trawler/_simhash_near.c) equals the numpy one.

``SimHashIndex._near`` calls C where blocks have at most 16 bits (k >= 3) and the
extension is built; ``_near_numpy`` is the reference, itself tested against a
brute-force scan in test_simhash.py. Both must give the same (distance, position)
list, in the same order, whatever the index went through: adds, merges, a tail.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trawler import simhash_index
from trawler.simhash_index import SimHashIndex, _blocks

FINGERPRINT = st.integers(0, 2**64 - 1)
# (which middle, bits flipped from it): a fingerprint of a cluster.
NEAR_A_MIDDLE = st.tuples(st.integers(0, 3), st.lists(st.integers(0, 63), max_size=12))


def _flip(value: int, bits: list[int]) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


def _both(index: SimHashIndex, query: int, max_bits: int, radius: int) -> list[tuple[int, int]]:
    have = index._near(query, max_bits, radius)
    assert have == index._near_numpy(query, max_bits, radius), (query, max_bits, radius)
    return have


def test_the_c_lookup_is_built_in_the_test_environment() -> None:
    """pip install -e builds it here: the tests below must not compare numpy with itself."""
    assert simhash_index.native_near is not None


@settings(max_examples=300, deadline=None)
@given(
    middles=st.lists(FINGERPRINT, min_size=1, max_size=4),
    members=st.lists(NEAR_A_MIDDLE, max_size=120),
    queries=st.lists(NEAR_A_MIDDLE, min_size=1, max_size=8),
    k=st.integers(3, 6),
    max_bits=st.integers(-1, 20),
    merged_every=st.sampled_from([0, 1, 7, 40]),
)
def test_equal_to_numpy_on_clustered_indexes(
    middles: list[int],
    members: list[tuple[int, list[int]]],
    queries: list[tuple[int, list[int]]],
    k: int,
    max_bits: int,
    merged_every: int,
) -> None:
    """Clusters around a few fingerprints (the benchmark web's one template): long
    buckets, repeats, ties; looked up between adds, with some of them merged (``load``
    every ``merged_every`` adds) and the rest in the tail."""
    index = SimHashIndex(k)
    for count, (middle, bits) in enumerate(members, 1):
        fingerprint = _flip(middles[middle % len(middles)], bits)
        if merged_every and count % merged_every == 0:
            index.load([(fingerprint, str(count))])  # merges the tail
        else:
            index.add(fingerprint, str(count))
        for middle_of_query, query_bits in queries[: 1 + count % 3]:
            query = _flip(middles[middle_of_query % len(middles)], query_bits)
            for radius in (0, 1):
                _both(index, query, max_bits, radius)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(3, 6), size=st.integers(0, 3000))
def test_equal_to_numpy_on_random_indexes(seed: int, k: int, size: int) -> None:
    """Random fingerprints, loaded (merged) then some added (the tail); queries near a
    stored one (1-7 bits off) and random."""
    rng = random.Random(seed)
    stored = [rng.getrandbits(64) for _ in range(size)]
    index = SimHashIndex(k)
    index.load((fingerprint, str(i)) for i, fingerprint in enumerate(stored[: size // 2]))
    for i, fingerprint in enumerate(stored[size // 2 :]):
        index.add(fingerprint, str(i))
    for _ in range(20):
        near = rng.choice(stored) if stored and rng.random() < 0.5 else rng.getrandbits(64)
        query = _flip(near, rng.sample(range(64), rng.randint(0, 7)))
        for radius in (0, 1):
            for max_bits in (0, k, 2 * k + 1, 10, 64):
                _both(index, query, max_bits, radius)


def test_equal_to_numpy_across_many_merges_with_a_tail() -> None:
    """Thousands of adds of one tight cluster: merges at 512, then every 4·sqrt(n),
    the buckets hundreds long, hits by the hundred, repeats of one fingerprint."""
    rng = random.Random(7)
    middle = rng.getrandbits(64)
    index = SimHashIndex(3)
    longest = 0
    for position in range(6000):
        fingerprint = middle if position % 10 == 0 else _flip(middle, rng.sample(range(64), 4))
        if position % 97 == 0:
            for radius in (0, 1):
                longest = max(longest, len(_both(index, _flip(middle, [5]), 10, radius)))
        index.add(fingerprint, str(position))
    assert 0 < index._merged < len(index) and longest > 1000  # merged, a tail, many hits


def test_the_lookup_answers_the_public_calls_the_same_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(11)
    middle = rng.getrandbits(64)
    index = SimHashIndex(3)
    for position in range(1500):
        index.add(_flip(middle, rng.sample(range(64), rng.randint(0, 9))), str(position))
    queries = [_flip(middle, rng.sample(range(64), rng.randint(0, 9))) for _ in range(100)]
    with_c = [(index.candidates(q, 10), index.find(q)) for q in queries]
    calls: list[int] = []
    numpy_near = index._near_numpy

    def counted(fingerprint: int, max_bits: int, radius: int) -> list[tuple[int, int]]:
        calls.append(fingerprint)
        return numpy_near(fingerprint, max_bits, radius)

    monkeypatch.setattr(simhash_index, "native_near", None)
    monkeypatch.setattr(index, "_near_numpy", counted)
    assert [(index.candidates(q, 10), index.find(q)) for q in queries] == with_c
    assert len(calls) == 2 * len(queries)  # the numpy path answered
    assert any(candidates for candidates, _ in with_c)


def test_below_k_3_the_numpy_search_answers() -> None:
    """Blocks of more than 16 bits keep no offsets: numpy searches the sorted keys."""
    index = SimHashIndex(2)
    index.add(0x0123_4567_89AB_CDEF, "a")
    assert index._offsets is None
    assert index.candidates(_flip(0x0123_4567_89AB_CDEF, [3, 40]), 5) == [0]


Arrays = tuple[Any, ...]  # near()'s arguments after (fingerprint, radius, max_bits)


def _arrays(index: SimHashIndex) -> Arrays:
    return (index._blocks, index._tag_shift, index._offsets, index._sorted_positions,
            index._fingerprints, index._merged, len(index))  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: (a[0], a[1], a[2].astype(np.int32), *a[3:]), "offsets intp"),
        (lambda a: (*a[:3], a[3].astype(np.uint64), *a[4:]), "positions uint32"),
        (lambda a: (*a[:5], a[5], 10**6), "holding count"),
        (lambda a: (*a[:5], 5, 4), "holding count"),
        (lambda a: ((), *a[1:]), "1..16 pairs"),
        (lambda a: (((64, 1),), *a[1:]), "shift must be below 64"),
        (lambda a: (((0, 0x1FFFF),), *a[1:]), "at most 16 bits"),
        (lambda a: (tuple(_blocks(4)), 30, *a[2:]), "arrays disagree"),
    ],
)
def test_inconsistent_arrays_are_value_errors_not_reads_out_of_bounds(
    change: Callable[[Arrays], Arrays], message: str
) -> None:
    assert simhash_index.native_near is not None
    index = SimHashIndex(3)
    index.load((i * 0x9E3779B97F4A7C15 % 2**64, str(i)) for i in range(100))
    index.add(5, "tail")
    arguments = change(_arrays(index))
    with pytest.raises(ValueError, match=message):
        simhash_index.native_near(5, 1, 10, *arguments)
    with pytest.raises(ValueError, match="radius must be 0 or 1"):
        simhash_index.native_near(5, 2, 10, *_arrays(index))
