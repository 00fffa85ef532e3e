"""The near-duplicate index: stored SimHash fingerprints (simhash.py), searched for
one within Hamming distance k in sub-linear time.

Pure, no I/O.

- ``SimHashIndex`` holds the permuted-blocks tables of Manku, Jain and Das Sarma
  ("Detecting near-duplicates for web crawling", WWW 2007); ``candidates``
  also probes the blocks one bit away, and finds every one within 2k+1.
- ``block_keys`` gives the same tables' keys of one fingerprint, for an index
  kept elsewhere (store/pg_dedup.py).

What to expect from k=3 (the paper's choice for 64 bits; it reports
precision and recall of about 0.75 there). The distance is binomial, so a
small edit is caught most of the time, not always: one word changed in a
300-word text changes 3 of ~300 shingles, ~2.9 bits expected, caught ~70% of
the time; in a 1,000-word text ~1.6 bits, caught ~93%. Replacing a whole
template (nav, header, footer: 10% of the words) moves ~9 bits: not a
near-duplicate at k=3 unless the boilerplate is stripped before hashing.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import isqrt

import numpy as np

from trawler.simhash import FINGERPRINT_BITS, native

# The lookup in C (trawler/_simhash_near.c) when pip built the extension, and built it
# from this version: a build from before it has no ``near``, and numpy answers.
native_near = getattr(native, "near", None)


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
    16 bits (k >= 3) a bucket is found by an offset per possible block value,
    and when the C extension is built the whole lookup is one call of it
    (trawler/_simhash_near.c): numpy's ~15 calls a lookup cost ~14 µs there,
    nearly all of it their per-call cost on arrays of a few hundred; C 3.2 µs.
    Wider blocks keep the keys beside the positions and search them, in numpy.
    Fingerprints added since the last merge, the tail, are all tested on each
    lookup; a merge copies the arrays once, so the tail is allowed to grow with
    the square root of the index (512 up to 16,000 fingerprints, 4,000 at a million).

    Storage: fingerprints in one numpy array (8 bytes), keys in a list
    (8 bytes + the key), a 4-byte position per table, and 2 MiB of offsets at
    k = 3 (8-byte: numpy's cumsum and repeat take them without a conversion, ~1 µs
    a lookup); below k = 3 a key per table instead (4 bytes at k = 2, 8 below).
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
        self._blocks = tuple(_blocks(k + 1))  # (shift, mask) per table
        # A table's key is its number above the widest block: all tables sort as one.
        self._tag_shift = max(mask.bit_length() for _, mask in self._blocks)
        key_space = (k + 1) << self._tag_shift
        self._key_type = np.uint64 if key_space > 1 << 32 else np.uint32
        self._sorted_positions = np.empty(0, np.uint32)  # by (key, position)
        # Blocks of up to 16 bits (k >= 3): where each key's bucket starts, one
        # slot per possible key (2 MiB at k = 3), and no keys kept. Wider ones keep
        # the sorted keys and search them.
        self._offsets = np.zeros(key_space + 1, np.intp) if key_space <= 1 << 18 else None
        self._ends = None if self._offsets is None else self._offsets[1:]  # a view
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
        if native_near is None or self._offsets is None:
            return self._near_numpy(fingerprint, max_bits, radius)
        found: list[tuple[int, int]] = native_near(
            fingerprint, radius, max_bits, self._blocks, self._tag_shift, self._offsets,
            self._sorted_positions, self._fingerprints, self._merged, len(self._keys),
        )  # fmt: skip
        return found

    def _near_numpy(self, fingerprint: int, max_bits: int, radius: int) -> list[tuple[int, int]]:
        """``_near`` in numpy: any k, and the reference the C is tested against."""
        positions = self._probed(fingerprint, radius)
        stored = self._fingerprints
        # The tail's fingerprints after the probed ones: all of them are tested.
        tested = np.concatenate((stored.take(positions), stored[self._merged : len(self._keys)]))
        tested ^= np.uint64(fingerprint)  # in place: tested is a new array
        distances = np.bitwise_count(tested)
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
        probes = np.array(own, self._key_type)[tables]
        probes ^= flips  # in place: one array less
        if self._offsets is not None and self._ends is not None:
            starts, ends = self._offsets.take(probes), self._ends.take(probes)
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
            assert self._ends is not None
            at = self._ends.take(keys)
            counts = np.bincount(keys, minlength=len(self._ends))
            self._ends += counts.cumsum()
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
