"""Unit tests for trawler.minhash: sketch format and the Jaccard estimate's accuracy."""

from __future__ import annotations

import random

import pytest

from trawler.minhash import SKETCH_MAX_BYTES, similarity, sketch
from trawler.simhash import words


def _shingles(text: str) -> set[tuple[bytes, ...]]:
    tokens = words(text)
    return {tuple(tokens[i : i + 3]) for i in range(len(tokens) - 2)}


def _jaccard(a: str, b: str) -> float:
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


def test_sketch_is_stable_and_ignores_case_punctuation_and_repeats() -> None:
    text = "The quick brown fox jumps over the lazy dog"
    one = sketch(text)
    assert one is not None and len(one) == 4 * 7  # all of its 7 shingles
    long = sketch(" ".join(f"w{i}" for i in range(500)))
    assert long is not None and len(long) == SKETCH_MAX_BYTES
    assert one == sketch("the QUICK brown fox, jumps over the lazy dog!")
    assert sketch("x y z x y z x y z") == sketch("x y z x y z x y z x y z")  # same shingle set
    # Stored sketches must not change between versions, processes or platforms.
    assert one.hex()[:40] == "e7ea630a1450a11456cabe1a6eaa081e0dc68928"
    assert similarity(one, one) == 1.0


def test_texts_without_words_have_no_sketch_and_bad_sketches_are_refused() -> None:
    assert sketch("") is None and sketch(" ... !!") is None
    assert sketch("two words") is not None  # one shingle of both words
    with pytest.raises(ValueError, match="a multiple of 4"):
        similarity(b"\x00" * 10, b"\x00" * SKETCH_MAX_BYTES)
    with pytest.raises(ValueError):
        similarity(b"", b"\x00" * 4)


def test_estimate_follows_the_true_jaccard_similarity() -> None:
    """Pairs from identical to unrelated: error within 4 standard errors of 64 bins."""
    rng = random.Random(1)
    vocabulary = [f"w{i}" for i in range(5000)]
    for _ in range(200):
        base = rng.choices(vocabulary, k=rng.randint(20, 2000))
        other = list(base)
        for _ in range(rng.randint(0, len(base))):
            other[rng.randrange(len(other))] = rng.choice(vocabulary)
        a, b = " ".join(base), " ".join(other)
        truth = _jaccard(a, b)
        estimate = similarity(sketch(a), sketch(b))  # type: ignore[arg-type]
        assert abs(estimate - truth) <= 4 * max(truth * (1 - truth), 0.01) ** 0.5 / 8 + 0.02


def test_one_word_changed_in_a_long_text_is_above_the_threshold() -> None:
    rng = random.Random(2)
    vocabulary = [f"w{i}" for i in range(5000)]
    passed = 0
    for _ in range(500):
        base = rng.choices(vocabulary, k=400)
        edited = list(base)
        edited[rng.randrange(400)] = "changed"
        passed += similarity(sketch(" ".join(base)), sketch(" ".join(edited))) >= 0.9  # type: ignore[arg-type]
    assert passed >= 495  # J = 395/401: below 0.9 needs 7+ of 64 bins off, p ~ 0.001
