"""Duplicate content: exact text hashes, 64-bit SimHash, and a near-duplicate index.

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
- ``SimHashIndex`` finds a stored fingerprint within Hamming distance k in
  sub-linear time: the permuted-blocks tables of Manku, Jain and Das Sarma
  ("Detecting near-duplicates for web crawling", WWW 2007); ``candidates``
  also probes the blocks one bit away, and finds every one within 2k+1.

What to expect from k=3 (the paper's choice for 64 bits; it reports
precision and recall of about 0.75 there). The distance is binomial, so a
small edit is caught most of the time, not always: one word changed in a
300-word text changes 3 of ~300 shingles, ~2.9 bits expected, caught ~70% of
the time; in a 1,000-word text ~1.6 bits, caught ~93%. Replacing a whole
template (nav, header, footer: 10% of the words) moves ~9 bits: not a
near-duplicate at k=3 unless the boilerplate is stripped before hashing.

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
"""

from __future__ import annotations

import hashlib
import zlib
from array import array
from collections.abc import Iterable
from math import isqrt

import numpy as np

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


def text_hash(text: str) -> str:
    """Exact-duplicate key: sha256 hex of the text, lowercased, whitespace collapsed."""
    normalised = " ".join(text.lower().split())
    return hashlib.sha256(normalised.encode("utf-8", "surrogatepass")).hexdigest()


def words(text: str) -> list[bytes]:
    """Lowercase UTF-8 words of ``text`` (``\\w+`` on ASCII; see the module doc)."""
    text = text.lower()
    for mark in _UNICODE_SEPARATORS:
        if mark in text:  # O(1) when the mark is wider than any character of text
            text = text.replace(mark, " ")
    return text.encode("utf-8", "surrogatepass").translate(_TOKEN_TABLE).split()


def simhash(text: str, shingle_words: int = 3) -> int:
    """64-bit SimHash of the text's distinct word shingles; 0 for a text without words.

    A text shorter than ``shingle_words`` words is one shingle of all its words.
    """
    return simhash_of_hashes(distinct_shingle_hashes(words(text), shingle_words))


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


class SimHashIndex:
    """Stored fingerprints, searchable for one within Hamming distance ``k``.

    Manku et al. (WWW 2007), §3: cut the 64 bits into k+1 blocks; two
    fingerprints at most k bits apart differ in at most k blocks, so they
    agree exactly on at least one. One table per block maps the block's value
    to the fingerprints that have it; a lookup scans k+1 buckets, each about
    n / 2**(64/(k+1)) long (15 at n = 1M, k = 3) instead of all n. The
    paper's extra permuted tables only pay off at billions of fingerprints.

    The tables are one numpy array of positions sorted by (table, block), so a
    lookup gathers all its buckets at once and tests every fingerprint in them
    with one XOR and popcount in C. Testing them one by one in Python cost
    ~0.25 µs each, and pages cut from one template cluster: ~230 of them a
    lookup on the crawl benchmark's web, where that loop was 12.5% of the
    crawl's GIL time (bench/bench_dedup_check.py). Where a block has at most
    16 bits (k >= 3) a bucket is found by an offset per possible block value;
    wider blocks keep the keys beside the positions and search them.
    Fingerprints added since the last merge, the tail, are all tested on each
    lookup; a merge copies the arrays once, so the tail is allowed to grow with
    the square root of the index (512 up to 16,000 fingerprints, 4,000 at a million).

    Storage: fingerprints in one numpy array (8 bytes), keys in a list
    (8 bytes + the key), a 4-byte position per table, and 1 MiB of offsets at
    k = 3; below k = 3 a key per table instead (4 bytes at k = 2, 8 below).
    Not thread-safe; the store's writer thread owns it.
    """

    def __init__(self, k: int = 3) -> None:
        if not 0 <= k < 16:
            raise ValueError(f"k must be 0..15, not {k}")
        self.k = k
        # Fingerprints in order of add, numpy's own (a view of an array('Q') would
        # stop it from growing while it lived); room for a few more.
        self._fingerprints = np.empty(0, np.uint64)
        self._keys: list[str] = []
        self._blocks = _blocks(k + 1)  # (shift, mask) per table
        # A table's key is its number above the widest block: all tables sort as one.
        self._tag_shift = max(mask.bit_length() for _, mask in self._blocks)
        key_space = (k + 1) << self._tag_shift
        self._key_type = np.uint64 if key_space > 1 << 32 else np.uint32
        self._sorted_positions = np.empty(0, np.uint32)  # by (key, position)
        # Blocks of up to 16 bits (k >= 3): where each key's bucket starts, one
        # slot per possible key (1 MiB at k = 3), and no keys kept. Wider ones keep
        # the sorted keys and search them.
        self._offsets = np.zeros(key_space + 1, np.int32) if key_space <= 1 << 18 else None
        self._sorted_keys = np.empty(0, self._key_type)
        self._merged = 0  # positions below are in the sorted arrays, the rest in the tail
        # Per probe radius (0: the block itself; 1: and the blocks one bit away,
        # for multi-probe lookups): which table's block each probe starts from,
        # and the bits it flips.
        self._probes = {radius: self._probe_pattern(radius) for radius in (0, 1)}

    def _probe_pattern(self, radius: int) -> tuple[np.ndarray, np.ndarray]:
        tables, flips = [], []
        for table, (_, mask) in enumerate(self._blocks):
            for flip in (0, *(1 << bit for bit in range(mask.bit_length() if radius else 0))):
                tables.append(table)
                flips.append(flip)
        return np.array(tables, np.intp), np.array(flips, self._key_type)

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, fingerprint: int, key: str) -> None:
        """Store a fingerprint (an unsigned 64-bit int) under ``key``."""
        self._append(fingerprint, key)
        if len(self._keys) - self._merged >= self._tail_limit():
            self._merge()

    def load(self, pairs: Iterable[tuple[int, str]]) -> None:
        """Bulk add, e.g. ``(int(hex, 16), url)`` rows read back from the store on restart."""
        for fingerprint, key in pairs:
            self._append(fingerprint, key)
        self._merge()

    def _append(self, fingerprint: int, key: str) -> None:
        count = len(self._keys)
        if count == len(self._fingerprints):  # grown by an eighth, as a list grows
            room = np.empty(count // 8 + 1024, np.uint64)
            self._fingerprints = np.concatenate((self._fingerprints, room))
        self._fingerprints[count] = fingerprint
        self._keys.append(key)

    def find(self, fingerprint: int) -> str | None:
        """Key of the closest stored fingerprint within ``k`` bits (the first added on a tie)."""
        nearest = self._near(fingerprint, self.k, 0)
        return self._keys[nearest[0][1]] if nearest else None

    def candidates(self, fingerprint: int, max_bits: int) -> list[int]:
        """Positions (in order of ``add``) of stored fingerprints within ``max_bits``,
        closest first, the first added first on a tie; ``key(position)`` names one.

        Multi-probe (Lv et al., "Multi-probe LSH", VLDB 2007): in each table the
        bucket of the fingerprint's block is scanned, and the buckets of the blocks
        one bit away from it. Every fingerprint within 2k+1 bits is found (in some
        block it then differs by one bit at most); farther ones when some block
        does. 17 buckets a table instead of one: ~1,000 distances to compute at a
        million fingerprints (k = 3), a few at a thousand.
        """
        return [position for _, position in self._near(fingerprint, max_bits, 1)]

    def key(self, position: int) -> str:
        return self._keys[position]

    def _near(self, fingerprint: int, max_bits: int, radius: int) -> list[tuple[int, int]]:
        """(distance, position) of the fingerprints within ``max_bits`` that are within
        ``radius`` bits of ``fingerprint`` in some block, in order."""
        positions = self._probed(fingerprint, radius)
        stored = self._fingerprints
        # The tail's fingerprints after the probed ones: all of them are tested.
        tested = np.concatenate((stored.take(positions), stored[self._merged : len(self._keys)]))
        distances = np.bitwise_count(tested ^ np.uint64(fingerprint))
        hits = (distances <= max_bits).nonzero()[0].tolist()
        if not hits:  # nearly always: at most a few candidates a lookup
            return []
        found = set()  # a fingerprint is in one bucket a table: two probes may find it
        for hit in hits:
            if hit < len(positions):
                found.add((int(distances[hit]), int(positions[hit])))
                continue
            position = self._merged + hit - len(positions)
            difference = int(stored[position]) ^ fingerprint
            if any(((difference >> s) & m).bit_count() <= radius for s, m in self._blocks):
                found.add((difference.bit_count(), position))
        return sorted(found)

    def _probed(self, fingerprint: int, radius: int) -> np.ndarray:
        """Positions in the merged buckets that the probes of ``radius`` hit."""
        own = [(table << self._tag_shift) | ((fingerprint >> shift) & mask)
               for table, (shift, mask) in enumerate(self._blocks)]  # fmt: skip
        tables, flips = self._probes[radius]
        probes = np.array(own, self._key_type)[tables] ^ flips
        if self._offsets is not None:
            starts, ends = self._offsets.take(probes), self._offsets[1:].take(probes)
        else:
            starts = self._sorted_keys.searchsorted(probes, "left")
            ends = self._sorted_keys.searchsorted(probes, "right")
        lengths = ends - starts
        # The buckets side by side: the j-th index of them all, in bucket i, is
        # j + ends[i] - (the length of buckets 0..i).
        totals = lengths.cumsum()
        if not totals[-1]:
            return self._sorted_positions[:0]
        indices = (ends - totals).repeat(lengths)
        indices += np.arange(len(indices))
        return self._sorted_positions.take(indices)

    def _tail_limit(self) -> int:
        # A merge copies the sorted arrays (~16 ns a fingerprint: 16 ms at a
        # million), a tail fingerprint costs ~1 ns a lookup; with a lookup per
        # add, merge plus tail per add is least near a tail of sqrt(32·n).
        return max(512, 4 * isqrt(self._merged))

    def _merge(self) -> None:
        """Move the tail into the sorted arrays (one copy of them)."""
        start, end = self._merged, len(self._keys)
        if start == end:
            return
        tail = self._fingerprints[start:end]
        keys = np.concatenate([((tail >> shift) & mask) | (table << self._tag_shift)
                               for table, (shift, mask) in enumerate(self._blocks)])  # fmt: skip
        positions = np.tile(np.arange(start, end, dtype=np.uint32), len(self._blocks))
        order = np.argsort(keys, kind="stable")
        keys, positions = keys[order].astype(self._key_type), positions[order]
        if self._offsets is None:
            at = np.searchsorted(self._sorted_keys, keys, "right")
            self._sorted_keys = np.insert(self._sorted_keys, at, keys)
        else:  # at the end of each key's bucket; the buckets after it move up
            at = self._offsets[1:].take(keys).astype(np.intp)
            counts = np.bincount(keys, minlength=len(self._offsets) - 1)
            self._offsets[1:] += counts.cumsum(dtype=np.int32)
        self._sorted_positions = np.insert(self._sorted_positions, at, positions)
        self._merged = end


def block_keys(fingerprint: int, k: int, radius: int = 0) -> list[int]:
    """``SimHashIndex(k)``'s table keys of ``fingerprint`` (one a table), and with
    ``radius`` 1 those of the blocks one bit away too: what an index kept elsewhere
    stores (radius 0) and probes (1) to find what ``candidates`` finds (store/pg_dedup.py)."""
    blocks = _blocks(k + 1)
    tag_shift = max(mask.bit_length() for _, mask in blocks)
    keys = []
    for table, (shift, mask) in enumerate(blocks):
        own = (table << tag_shift) | ((fingerprint >> shift) & mask)
        keys.append(own)
        if radius:
            keys += [own ^ (1 << bit) for bit in range(mask.bit_length())]
    return keys


def _blocks(count: int) -> list[tuple[int, int]]:
    """(shift, mask) of ``count`` contiguous blocks covering 64 bits, widths differing by <= 1."""
    blocks, shift = [], 0
    for i in range(count):
        width = FINGERPRINT_BITS // count + (1 if i < FINGERPRINT_BITS % count else 0)
        blocks.append((shift, (1 << width) - 1))
        shift += width
    return blocks
