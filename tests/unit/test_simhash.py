"""Unit tests for trawler.simhash: text hashes, SimHash quality, the near-duplicate index.

SimHash distances are random variables (binomial, see the module doc), so the
quality tests run many seeded trials and check rates, with bounds well inside
what the textbook algorithm achieves and well outside what a broken hash would.
"""

from __future__ import annotations

import random
from hashlib import blake2b

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trawler.simhash import hamming, hex64, simhash, text_hash, words
from trawler.simhash_index import SimHashIndex

K = 3


def _vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(size)]


class TextGen:
    """Random word sequences with a Zipf-like word frequency, like real text."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocabulary = _vocabulary(self.rng)
        self.weights = [1 / rank for rank in range(1, len(self.vocabulary) + 1)]

    def words(self, count: int) -> list[str]:
        return self.rng.choices(self.vocabulary, self.weights, k=count)


def _reference_simhash(text: str, shingle_words: int = 3) -> int:
    """The textbook algorithm: blake2b per shingle, a loop over 64 bits."""
    tokens = words(text)
    width = min(shingle_words, len(tokens))
    votes = [0] * 64
    for shingle in {b" ".join(tokens[i : i + width]) for i in range(len(tokens) - width + 1)}:
        digest = blake2b(shingle, digest_size=8).digest()
        shingle = int.from_bytes(digest, "little")
        for bit in range(64):
            votes[bit] += 1 if shingle >> bit & 1 else -1
    return sum(1 << bit for bit in range(64) if votes[bit] >= 0)


def _catch_rate(pairs: list[tuple[str, str]]) -> float:
    return sum(hamming(simhash(a), simhash(b)) <= K for a, b in pairs) / len(pairs)


# --- text_hash and tokenising ---------------------------------------------------------


def test_text_hash_ignores_case_and_whitespace() -> None:
    assert text_hash("Hello   World\n") == text_hash("hello world")
    assert text_hash("hello world") != text_hash("hello worlds")
    assert len(text_hash("")) == 64


@settings(max_examples=300)
@given(st.text())
def test_text_hash_of_a_collapsed_text_skips_the_collapse_alone(text: str) -> None:
    """``collapsed=True`` (parse.py's texts) gives the same hash: no character
    lowercases to whitespace."""
    collapsed = " ".join(text.split())
    assert text_hash(collapsed, collapsed=True) == text_hash(text)


def test_words_of_ascii_and_unicode_texts_alike() -> None:
    # ASCII text skips the scans for Unicode separators: same words either way
    assert words("a\u00a0b c") == [b"a", b"b", b"c"] == words("a b c")


def test_words_match_regex_words_on_ascii_and_split_unicode_punctuation() -> None:
    assert words("Don't STOP—me now… «now»!") == [b"don", b"t", b"stop", b"me", b"now", b"now"]
    assert words("Café naïve, 2024_01") == ["café".encode(), "naïve".encode(), b"2024_01"]
    assert words("  ...  ") == []


# --- simhash ----------------------------------------------------------------------


def test_simhash_is_stable_64_bit_and_insensitive_to_case_and_punctuation() -> None:
    fingerprint = simhash("The quick brown fox jumps over the lazy dog")
    assert 0 <= fingerprint < 2**64
    assert fingerprint == simhash("the QUICK brown fox, jumps over the lazy dog!")
    # Stored fingerprints must not change between versions, processes or platforms.
    assert hex64(fingerprint) == "1a29ea1fef282c16"
    assert len(hex64(1)) == 16 and hex64(2**64 - 1) == "f" * 16


def test_simhash_of_short_and_empty_texts() -> None:
    assert simhash("") == 0 and simhash("!!!") == 0
    assert simhash("one two") == simhash("one two", shingle_words=2)  # one shingle
    with pytest.raises(ValueError):
        simhash("text", shingle_words=0)


def test_simhash_statistics_match_the_textbook_algorithm() -> None:
    """The fast lane arithmetic behaves like blake2b per shingle: same distance laws."""
    gen = TextGen(1)
    texts = [" ".join(gen.words(300)) for _ in range(120)]
    for fingerprint_of in (simhash, _reference_simhash):
        fps = [fingerprint_of(t) for t in texts]
        distances = [hamming(a, b) for i, a in enumerate(fps) for b in fps[i + 1 :]]
        mean = sum(distances) / len(distances)
        assert 31 < mean < 33, fingerprint_of  # unrelated texts: Binomial(64, 1/2)
        for bit in range(64):  # every bit is a fair coin
            assert 0.3 < sum(fp >> bit & 1 for fp in fps) / len(fps) < 0.7


def test_repeated_boilerplate_does_not_set_the_bits() -> None:
    """Each distinct shingle votes once: two texts sharing only a phrase repeated
    hundreds of times are as far apart as unrelated texts (with counts: 0-3 bits)."""
    gen = TextGen(5)
    distances = []
    for _ in range(50):
        a, b = ([w for word in gen.words(300) for w in (word, "in", "module", "os")]
                for _ in range(2))  # fmt: skip
        distances.append(hamming(simhash(" ".join(a), 2), simhash(" ".join(b), 2)))
    assert min(distances) > 12 and 26 < sum(distances) / len(distances) < 38


def test_one_word_changed_is_caught() -> None:
    gen = TextGen(2)
    short, long = [], []
    for size, pairs in ((300, short), (1000, long)):
        for _ in range(300):
            original = gen.words(size)
            edited = list(original)
            edited[gen.rng.randrange(size)] = "changed"
            pairs.append((" ".join(original), " ".join(edited)))
    # Theory (module doc): ~0.70 for 3 of 298 shingles changed, ~0.93 for 3 of 998.
    assert _catch_rate(short) > 0.6
    assert _catch_rate(long) > 0.85


def test_boilerplate_change_is_caught() -> None:
    """Same body; the header/nav/footer (10% of the words) differs in a date and a count."""
    gen = TextGen(3)
    pairs = []
    for _ in range(300):
        header, body, footer = gen.words(50), gen.words(900), gen.words(50)
        a = header + ["updated", "3", "may"] + body + footer + ["visitors", "1041"]
        b = header + ["updated", "4", "may"] + body + footer + ["visitors", "1042"]
        pairs.append((" ".join(a), " ".join(b)))
    # 5 of ~1,000 shingles differ: ~2 bits expected, within 3 bits ~85% of the time.
    assert _catch_rate(pairs) > 0.75
    assert all(hamming(simhash(a), simhash(b)) < 16 for a, b in pairs)


def test_distinct_texts_are_not_flagged() -> None:
    """Distinct pages of one site share a template (10% of the words) but not their body."""
    gen = TextGen(4)
    header, footer = gen.words(15), gen.words(15)
    index = SimHashIndex(K)
    flagged = 0
    for i in range(3000):
        fingerprint = simhash(" ".join(header + gen.words(270) + footer))
        flagged += index.find(fingerprint) is not None
        index.add(fingerprint, f"page-{i}")
    assert flagged / 3000 < 0.001  # expected: ~1e-11 for 4.5M pairs 30 bits apart


# --- SimHashIndex ---------------------------------------------------------------


def _flip(fingerprint: int, bits: list[int]) -> int:
    for bit in bits:
        fingerprint ^= 1 << bit
    return fingerprint


def _brute_force(stored: list[tuple[int, str]], query: int, k: int) -> str | None:
    best = min(stored, key=lambda pair: hamming(pair[0], query), default=None)
    if best is None or hamming(best[0], query) > k:
        return None
    return best[1]


# The index tests run twice: its lookup in C, then in numpy (tests/unit/conftest.py).
@pytest.mark.usefixtures("lookup_path")
@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_index_matches_brute_force_with_planted_neighbours(k: int) -> None:
    rng = random.Random(k)
    stored = [(rng.getrandbits(64), f"key-{i}") for i in range(2000)]
    index = SimHashIndex(k)
    index.load(stored)
    assert len(index) == 2000
    for i in range(500):
        base, key = stored[rng.randrange(len(stored))]
        distance = i % (k + 2)  # 0..k must be found, k+1 must not
        query = _flip(base, rng.sample(range(64), distance))
        expected = _brute_force(stored, query, k)
        assert index.find(query) == expected
        assert (expected == key) == (distance <= k)
    misses = [rng.getrandbits(64) for _ in range(200)]
    assert all(index.find(q) == _brute_force(stored, q, k) for q in misses)


@pytest.mark.usefixtures("lookup_path")
@settings(max_examples=200, deadline=None)
@given(
    base=st.integers(0, 2**64 - 1),
    flips=st.lists(st.integers(0, 63), unique=True, max_size=5),
    k=st.integers(0, 4),
)
def test_index_finds_exactly_the_fingerprints_within_k(base: int, flips: list[int], k: int) -> None:
    index = SimHashIndex(k)
    index.add(base, "original")
    query = _flip(base, flips)
    assert (index.find(query) == "original") == (len(flips) <= k)


@pytest.mark.usefixtures("lookup_path")
def test_index_prefers_the_closest_then_the_first_added() -> None:
    index = SimHashIndex(3)
    base = 0x0123_4567_89AB_CDEF
    index.add(_flip(base, [1, 2, 3]), "three-away")
    index.add(_flip(base, [40]), "one-away")
    index.add(_flip(base, [50]), "one-away-later")
    assert index.find(base) == "one-away"
    index.add(base, "exact")
    assert index.find(base) == "exact"
    assert SimHashIndex().find(base) is None


def test_index_rejects_unsupported_k() -> None:
    with pytest.raises(ValueError):
        SimHashIndex(-1)


@pytest.mark.usefixtures("lookup_path")
def test_candidates_within_2k_plus_1_bits_are_all_found_and_farther_ones_often() -> None:
    index = SimHashIndex(K)
    stored = 0x0123_4567_89AB_CDEF
    index.add(stored, "a")
    near = _flip(stored, [1, 2, 17])
    seven = _flip(stored, [1, 2, 17, 18, 33, 34, 49])  # one block with one bit off
    ten_one_block_clean = _flip(stored, [20, 21, 22, 36, 37, 38, 52, 53, 54, 55])
    eight_all_blocks_twice = _flip(stored, [1, 2, 17, 18, 33, 34, 49, 50])
    assert index.candidates(near, 3) == [0] and index.key(0) == "a"
    assert index.candidates(seven, 3) == []  # farther than asked
    assert index.candidates(seven, 10) == [0]
    assert index.candidates(ten_one_block_clean, 10) == [0]
    assert index.candidates(eight_all_blocks_twice, 10) == []  # no block within one bit
    for _ in range(200):  # every fingerprint within 2k+1 = 7 bits
        rng = random.Random(_)
        query = _flip(stored, rng.sample(range(64), rng.randint(0, 7)))
        assert index.candidates(query, 7) == [0]


# --- candidates against a brute-force scan -----------------------------------------


def _block_masks(k: int) -> list[int]:
    """The index's k+1 contiguous blocks, lowest bits first, the first ones wider by one."""
    masks, shift = [], 0
    for i in range(k + 1):
        width = 64 // (k + 1) + (1 if i < 64 % (k + 1) else 0)
        masks.append(((1 << width) - 1) << shift)
        shift += width
    return masks


def _brute_force_candidates(stored: list[int], query: int, k: int, max_bits: int) -> list[int]:
    """What ``candidates`` promises, by scanning everything: within ``max_bits`` and
    within one bit of the query in some block; closest first, then first added."""
    masks = _block_masks(k)
    found = [
        (hamming(fingerprint, query), position)
        for position, fingerprint in enumerate(stored)
        if hamming(fingerprint, query) <= max_bits
        and any(((fingerprint ^ query) & mask).bit_count() <= 1 for mask in masks)
    ]
    return [position for _, position in sorted(found)]


def _clustered(rng: random.Random, count: int, centres: int, max_flips: int) -> list[int]:
    """Fingerprints in a few tight clusters (the benchmark web's one template), some
    repeated, a few random: long buckets, many candidates, ties."""
    middles = [rng.getrandbits(64) for _ in range(centres)]
    out: list[int] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.05 and out:
            out.append(rng.choice(out))  # the same fingerprint again
        elif roll < 0.1:
            out.append(rng.getrandbits(64))
        else:
            middle = rng.choice(middles)
            out.append(_flip(middle, rng.sample(range(64), rng.randint(0, max_flips))))
    return out


@pytest.mark.usefixtures("lookup_path")
@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
def test_candidates_equal_a_brute_force_scan_on_clustered_fingerprints(k: int) -> None:
    """Looked up between adds, as ContentDedup does, over several thousand adds so that
    whatever the index does as it grows is crossed; queries near and far."""
    rng = random.Random(100 + k)
    fingerprints = _clustered(rng, 5000, centres=6, max_flips=12)
    index, stored = SimHashIndex(k), []
    for position, fingerprint in enumerate(fingerprints):
        if position % 7 == 0:
            query = _flip(fingerprint, rng.sample(range(64), rng.randint(0, 3)))
            max_bits = rng.choice([0, 3, 2 * k + 1, 10, 14])
            assert index.candidates(query, max_bits) == _brute_force_candidates(
                stored, query, k, max_bits
            ), (position, query, max_bits)
        index.add(fingerprint, str(position))
        stored.append(fingerprint)
    keyed = [(fingerprint, str(position)) for position, fingerprint in enumerate(stored)]
    for query in [rng.getrandbits(64) for _ in range(50)] + fingerprints[-50:]:
        assert index.candidates(query, 10) == _brute_force_candidates(stored, query, k, 10)
        assert index.find(query) == _brute_force(keyed, query, k)


@pytest.mark.usefixtures("lookup_path")
@settings(max_examples=150, deadline=None)
@given(
    middle=st.integers(0, 2**64 - 1),
    flips=st.lists(st.lists(st.integers(0, 63), max_size=12), min_size=1, max_size=60),
    query_flips=st.lists(st.integers(0, 63), max_size=12),
    k=st.integers(0, 5),
    max_bits=st.integers(0, 16),
)
def test_candidates_equal_a_brute_force_scan(
    middle: int, flips: list[list[int]], query_flips: list[int], k: int, max_bits: int
) -> None:
    stored = [_flip(middle, bits) for bits in flips]
    index = SimHashIndex(k)
    index.load((fingerprint, str(i)) for i, fingerprint in enumerate(stored))
    query = _flip(middle, query_flips)
    assert index.candidates(query, max_bits) == _brute_force_candidates(stored, query, k, max_bits)
