"""Duplicate content: exact text hashes and 64-bit SimHash fingerprints.

Pure, no I/O.

- ``text_hash`` is the exact-duplicate key: sha256 of the text lowercased,
  with whitespace runs collapsed.
- ``simhash`` is Charikar's fingerprint ("Similarity estimation techniques
  from rounding algorithms", STOC 2002) over word shingles. Each distinct
  shingle votes +1/-1 on each of the 64 bits, once however often it occurs;
  a bit is 1 when its vote is >= 0. The expected Hamming distance of two
  fingerprints is 64·θ/π, θ the angle between the two texts' shingle-set
  vectors. Counting a shingle once is what keeps boilerplate from setting
  the bits: with counts, the Python docs' genindex pages (one phrase, "in
  module", in 7% of the word pairs) came out 2-3 bits apart while sharing
  ~5% of their shingles. A SimHash match is only a candidate: dedup.py
  confirms it with a MinHash sketch (minhash.py).
- simhash_index.py keeps fingerprints and finds the stored ones near another
  (``SimHashIndex``): the near-duplicate index.

How ``simhash`` is made fast (a 10 KB text, ~1,500 words: ~13 ms for the
textbook loop — blake2b per shingle, a Python loop over 64 bits — vs
~0.35 ms here, on one core of the development machine):

1. Tokenise on bytes: lowercase, encode UTF-8, ``bytes.translate`` every
   ASCII byte that is not [a-z0-9_] to a space, ``split()``. Same words as
   ``\\w+`` on ASCII text; bytes >= 0x80 count as word characters, so a few
   common Unicode punctuation marks are replaced by spaces first.
2. Hash each word once with CRC-32 (C, no object per call but the int).
3. Hash all shingles at once with big-integer "lanes": the word hashes are
   packed into one integer, 64 bits a word; shifting that integer by 64·j
   lines word i+j up with word i, so one multiplication and one XOR per
   shingle position hash every shingle together. A 32-bit value times a
   32-bit constant never carries into the next lane. The shingle hash is
   simple tabulation (Pătraşcu and Thorup, "The power of simple tabulation
   hashing", 2011) with per-position tables T_j(w) = fold(crc(w)·K_j), where
   fold(p) = low32(p) XOR high32(p) (the "mum" mix of wyhash), computed
   twice with different constants for the two 32-bit halves.
4. Count the votes without a per-bit loop: the shingle hashes' bytes are
   sliced into 8 columns (byte j of every hash) and each bit is counted with
   one AND and ``int.bit_count`` over the whole column: 64 C-level passes.

Steps 2-4 are now numpy (``distinct_shingle_hashes``), and, when pip built it,
one C call a page (``native_fingerprints``, trawler/_fingerprint.c): ~120 words
took ~48 µs in ~20 numpy calls, mostly their per-call cost. The numpy code stays,
for installs without a C compiler and as the reference the C is tested against.
"""

from __future__ import annotations

import hashlib
import zlib
from array import array

import numpy as np

try:  # built by `pip install` when a C compiler and zlib's headers are there
    from trawler import _fingerprint as native
except ImportError:  # the numpy path below: the same values, ~10x the time a page
    native = None  # type: ignore[assignment]

FINGERPRINT_BITS = 64
MAX_SHINGLE_WORDS = 8

# bytes.translate table for tokenising: ASCII bytes that are not word
# characters become spaces; bytes >= 0x80 (inside UTF-8 letters) are kept.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_TOKEN_TABLE = bytes(c if c in _WORD_BYTES else 0x20 for c in range(256))
# Non-ASCII punctuation and spaces common in web text: no-break space,
# « » ¡ ¿ · ©, dashes, curly quotes, bullet, ellipsis, ‹ ›, CJK punctuation.
_UNICODE_SEPARATORS = (
    "\u00a0\u00ab\u00bb\u00a1\u00bf\u00b7\u00a9\u00ae\u00b0"
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2018\u2019\u201a\u201c\u201d\u201e"
    "\u2020\u2021\u2022\u2026\u2030\u2032\u2033\u2039\u203a"
    "\u3000\u3001\u3002\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"
)

# Odd 32-bit multipliers, one per shingle position, for each 32-bit half
# of the shingle hash (fixed forever: fingerprints are stored).
_MULTIPLIERS_HIGH = (
    0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F,
    0x165667B1, 0xD3A2646D, 0xFD7046C5, 0xB55A4F09,
)  # fmt: skip
_MULTIPLIERS_LOW = (
    0x8F5D3C07, 0xE6546B65, 0x4CF5AD43, 0x68E31DA5,
    0xA54FF53B, 0x510E527F, 0x9B05688D, 0x1F83D9AB,
)  # fmt: skip
_LOW32_LANE = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_UINT64 = np.dtype("<u8")
# Per shingle position, its two multipliers as a column (high half, low half).
_MULTIPLIER_COLUMNS = tuple(
    np.array([[high], [low]], _UINT64)
    for high, low in zip(_MULTIPLIERS_HIGH, _MULTIPLIERS_LOW, strict=True)
)
_32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_VOTE_CHUNK = 1 << 16  # hashes counted at a time: 4 MiB of bits


def text_hash(text: str, collapsed: bool = False) -> str:
    """Exact-duplicate key: sha256 hex of the text, lowercased, whitespace collapsed.

    ``collapsed``: the text is collapsed already (one space between words, none at
    the ends: parse.py's texts), so the split and join are skipped (~4 µs of 6 on a
    benchmark page): the same hash, as no character lowercases to whitespace."""
    normalised = text.lower() if collapsed else " ".join(text.lower().split())
    return hashlib.sha256(normalised.encode("utf-8", "surrogatepass")).hexdigest()


def words(text: str) -> list[bytes]:
    """Lowercase UTF-8 words of ``text`` (``\\w+`` on ASCII; see the module doc)."""
    text = text.lower()
    for mark in () if text.isascii() else _UNICODE_SEPARATORS:  # 44 scans of the text
        if mark in text:  # O(1) when the mark is wider than any character of text
            text = text.replace(mark, " ")
    return text.encode("utf-8", "surrogatepass").translate(_TOKEN_TABLE).split()


def simhash(text: str, shingle_words: int = 3) -> int:
    """64-bit SimHash of the text's distinct word shingles; 0 for a text without words.

    A text shorter than ``shingle_words`` words is one shingle of all its words.
    """
    if native is not None:
        return native_fingerprints(text, shingle_words)[0]
    return simhash_of_hashes(distinct_shingle_hashes(words(text), shingle_words))


def native_fingerprints(text: str, shingle_words: int) -> tuple[int, bytes | None]:
    """``(simhash(text), minhash.sketch_of_hashes(...))`` in one C call; only when
    ``native`` is built. ASCII text is cut into words in C (the same words: see the
    C source), other text by ``words``."""
    if not 1 <= shingle_words <= MAX_SHINGLE_WORDS:  # before C's int conversion
        raise ValueError(f"shingle_words must be 1..{MAX_SHINGLE_WORDS}, not {shingle_words}")
    if text.isascii():
        return native.of_ascii(text, shingle_words)
    return native.of_words(words(text), shingle_words)


def distinct_shingle_hashes(tokens: list[bytes], shingle_words: int = 3) -> np.ndarray:
    """The 64-bit hashes of the distinct shingles of a text cut into ``words``, sorted
    (uint64): what ``simhash_of_hashes`` and ``minhash.sketch_of_hashes`` take.

    The lanes of ``shingle_hashes``, computed in numpy: on the ~100-word pages of the
    crawl benchmark, the big-integer conversions and a set cost 3x the arithmetic."""
    if not 1 <= shingle_words <= MAX_SHINGLE_WORDS:
        raise ValueError(f"shingle_words must be 1..{MAX_SHINGLE_WORDS}, not {shingle_words}")
    if not tokens:
        return np.empty(0, _UINT64)
    width = min(shingle_words, len(tokens))
    count = len(tokens) - width + 1
    crcs = np.fromiter(map(zlib.crc32, tokens), _UINT64, len(tokens))
    # A 32-bit CRC times a 32-bit multiplier fits in 64 bits, as in a lane: no wrap.
    halves = crcs[:count] * _MULTIPLIER_COLUMNS[0]  # row 0: high half, row 1: low
    for position in range(1, width):
        halves ^= crcs[position : position + count] * _MULTIPLIER_COLUMNS[position]
    halves ^= halves >> _32  # fold: low32(p) ^ high32(p)
    hashes = halves[0] << _32
    hashes |= halves[1] & _LOW32
    hashes.sort()
    return hashes[first_of_runs(hashes)]  # distinct


def first_of_runs(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values in a non-empty array starts (a bool mask). Into a
    mask of its own, not ``np.concatenate(([True], ...))``: on a page's ~100 shingles
    numpy's per-call cost is the whole cost, and that made a list into an array first."""
    starts = np.empty(len(values), bool)
    starts[0] = True
    np.not_equal(values[1:], values[:-1], out=starts[1:])
    return starts


def simhash_of_hashes(hashes: np.ndarray) -> int:
    """The SimHash of distinct shingle hashes (each votes once); 0 for none."""
    count = len(hashes)
    if not count:
        return 0
    # Bit i of a hash is bit i % 8 of its little-endian byte i // 8: a row of 64 bits
    # a hash. In chunks: a page of a million words must not take 64 bytes a word.
    # Votes in uint32, no generator: on a page's ~100 shingles the int64 reduction
    # and the sum() around it cost twice the counting (bench/bench_parsepool.py).
    votes = _votes(hashes[:_VOTE_CHUNK])
    for start in range(_VOTE_CHUNK, count, _VOTE_CHUNK):
        votes += _votes(hashes[start : start + _VOTE_CHUNK])
    majority = np.packbits(votes >= (count + 1) // 2, bitorder="little")  # 2 * votes >= count
    return int.from_bytes(majority, "little")


def _votes(hashes: np.ndarray) -> np.ndarray:
    """How many of ``hashes`` have each of the 64 bits set (uint32: 2**32 hashes
    would take 32 GiB)."""
    return np.add.reduce(_bit_rows(hashes), axis=0, dtype=np.uint32)


def _bit_rows(hashes: np.ndarray) -> np.ndarray:
    return np.unpackbits(hashes.view(np.uint8), bitorder="little").reshape(-1, FINGERPRINT_BITS)


def shingle_hashes(tokens: list[bytes], width: int, count: int) -> int:
    """All shingle hashes at once, as 64-bit lanes of one big integer (lane i = shingle i)."""
    packed = array("Q", map(zlib.crc32, tokens)).tobytes()
    low32 = int.from_bytes(_LOW32_LANE * count, "little")
    high = low = 0
    for position in range(width):
        lanes = int.from_bytes(packed[8 * position : 8 * (position + count)], "little")
        high ^= lanes * _MULTIPLIERS_HIGH[position]
        low ^= lanes * _MULTIPLIERS_LOW[position]
    high = (high ^ (high >> 32)) & low32  # fold: low32(p) ^ high32(p), lane by lane
    low = (low ^ (low >> 32)) & low32
    return (high << 32) | low


def _majority(hashes: int, count: int) -> int:
    """Bit i of the result is 1 when at least half of the ``count`` hashes have it set."""
    packed = hashes.to_bytes(8 * count, "little")
    bit_masks = [int.from_bytes(bytes((1 << bit,)) * count, "little") for bit in range(8)]
    fingerprint = 0
    for byte in range(8):
        column = int.from_bytes(packed[byte::8], "little")  # byte `byte` of every hash
        for bit, mask in enumerate(bit_masks):
            if 2 * (column & mask).bit_count() >= count:
                fingerprint |= 1 << (8 * byte + bit)
    return fingerprint


def hex64(fingerprint: int) -> str:
    """16 lowercase hex digits (how the store keeps a fingerprint)."""
    return f"{fingerprint:016x}"


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
