"""The C fingerprints (trawler/_fingerprint.c) equal the numpy ones, bit for bit.

SimHash values and MinHash sketches are stored: whichever path an install takes, a
text must get the same values. The reference is simhash.py's numpy code (itself
tested against the big-integer lanes in test_fingerprints_same.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trawler import minhash
from trawler import simhash as simhash_module
from trawler.minhash import fingerprints, sketch, sketch_of_hashes
from trawler.simhash import (
    MAX_SHINGLE_WORDS,
    distinct_shingle_hashes,
    native_fingerprints,
    simhash,
    simhash_of_hashes,
    words,
)

PINNED_TEXT = "The quick brown fox jumps over the lazy dog"
PINNED_SIMHASH = 0x1A29EA1FEF282C16
PINNED_SKETCH_HEAD = "e7ea630a1450a11456cabe1a6eaa081e0dc68928"

# Any code point, lone surrogates included, with ASCII words and separators mixed in
# so that texts have shingles to hash.
ANY_CHARACTER = st.characters(codec=None, exclude_categories=())
TEXT = st.lists(
    st.one_of(
        st.text(ANY_CHARACTER, max_size=12),
        st.sampled_from(["The", "QUAY", "x_1", "Ünïcödé", "日本", "\u212a", "İ", " ", "—", "-"]),
    ),
    max_size=60,
).map(" ".join)


def reference(text: str, shingle_words: int) -> tuple[int, bytes | None]:
    shingles = distinct_shingle_hashes(words(text), shingle_words)
    return simhash_of_hashes(shingles), sketch_of_hashes(shingles)


def test_the_c_module_is_built_in_the_test_environment() -> None:
    """pip install -e builds it here: the tests below must not pass on the fallback."""
    assert simhash_module.native is not None


@settings(max_examples=500, deadline=None)
@given(TEXT, st.integers(1, MAX_SHINGLE_WORDS))
def test_equal_to_numpy_on_any_text(text: str, shingle_words: int) -> None:
    assert native_fingerprints(text, shingle_words) == reference(text, shingle_words)


@settings(max_examples=300, deadline=None)
@given(st.text("aBz09_ .,;!?-\t\n\x00\x7f", max_size=400), st.integers(1, MAX_SHINGLE_WORDS))
def test_equal_to_numpy_on_ascii_text(text: str, shingle_words: int) -> None:
    """ASCII is cut into words in C: the same words as ``words``."""
    assert native_fingerprints(text, shingle_words) == reference(text, shingle_words)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=20), max_size=50), st.integers(1, 8))
def test_equal_to_numpy_on_any_words(tokens: list[bytes], shingle_words: int) -> None:
    assert simhash_module.native is not None
    shingles = distinct_shingle_hashes(tokens, shingle_words)
    want = simhash_of_hashes(shingles), sketch_of_hashes(shingles)
    assert simhash_module.native.of_words(tokens, shingle_words) == want


def test_equal_on_long_texts_and_long_words() -> None:
    """70,000 distinct shingles (numpy counts their votes in two chunks), and words
    longer than the C tokeniser's stack buffer."""
    rng = np.random.default_rng(3)
    text = " ".join(f"W{n}" for n in rng.integers(0, 5_000, 70_002))
    text += " " + "a" * 300 + " B" * 5 + " ü" + "x" * 1_000
    for ascii_text in (text, text.replace(" ü", " u")):
        assert native_fingerprints(ascii_text, 3) == reference(ascii_text, 3)
    assert len(distinct_shingle_hashes(words(text), 3)) > 1 << 16


@pytest.mark.parametrize(
    "text",
    [
        "same " * 3_000,  # one shingle, 2,998 times: every hash equal
        "a b c d " * 800,  # four shingles, many times each
        " ".join(f"w{n % 97} w{n % 89}" for n in range(4_000)),  # many repeats, unordered
        " ".join(f"w{n:05d}" for n in range(600)),  # words in order
    ],
)
def test_equal_on_texts_of_repeated_shingles(text: str) -> None:
    """The C quicksort on runs of equal and of ordered hashes."""
    for shingle_words in (1, 3):
        assert native_fingerprints(text, shingle_words) == reference(text, shingle_words)


def test_short_and_empty_texts() -> None:
    for text in ("", "!!! ...", "one", "one two", "éé", "\ud800", "a\udfffb c"):
        for shingle_words in (1, 3, 8):
            assert native_fingerprints(text, shingle_words) == reference(text, shingle_words)
    assert native_fingerprints("", 3) == (0, None)


def test_pinned_values() -> None:
    """Values stored by earlier versions."""
    have, one = fingerprints(PINNED_TEXT)
    assert have == simhash(PINNED_TEXT) == PINNED_SIMHASH
    assert one is not None and one == sketch(PINNED_TEXT)
    assert one.hex()[:40] == PINNED_SKETCH_HEAD
    assert fingerprints(PINNED_TEXT.upper() + "!") == (have, one)


@pytest.mark.parametrize("shingle_words", [0, MAX_SHINGLE_WORDS + 1, 1 << 40])
def test_bad_widths_are_value_errors(shingle_words: int) -> None:
    with pytest.raises(ValueError, match="shingle_words must be 1..8"):
        native_fingerprints("some text", shingle_words)


def test_without_the_c_module_the_numpy_path_gives_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_c = [fingerprints(PINNED_TEXT), simhash(PINNED_TEXT, 2), sketch("a b c d")]
    monkeypatch.setattr(simhash_module, "native", None)
    calls: list[str] = []
    monkeypatch.setattr(minhash, "distinct_shingle_hashes", _counted(calls))
    without = [fingerprints(PINNED_TEXT), simhash(PINNED_TEXT, 2), sketch("a b c d")]
    assert without == with_c
    assert without[0][0] == PINNED_SIMHASH
    assert len(calls) == 2  # fingerprints and sketch took the numpy path


def _counted(calls: list[str]) -> Callable[[list[bytes], int], np.ndarray]:
    def distinct(tokens: list[bytes], shingle_words: int = 3) -> np.ndarray:
        calls.append("numpy")
        return distinct_shingle_hashes(tokens, shingle_words)

    return distinct
