"""Dedup: fingerprints of URLs (the seen set) and of page content (duplicates).

The URL-seen set stores 64-bit fingerprints of normalised URLs, as DESIGN.md
asks: 8 bytes a URL on disk, exact for any crawl we will run (the chance of
one collision among 10^8 URLs is about 3 in 10,000).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from hashlib import blake2b

from trawler.minhash import NEAR_DUPLICATE_JACCARD, SKETCH_MAX_BYTES, is_sketch, similarity
from trawler.records import PageRecord
from trawler.simhash_index import SimHashIndex

# SimHash distance up to which a stored page is a near-duplicate candidate, to be
# confirmed by its sketch. The index finds every one within 2k+1 bits (7 at the
# default k = 3: SimHashIndex.candidates) and most up to 10. One word changed in
# real documentation pages (bench/bench_neardup.py; the 1,924 copies whose sketch
# agrees): 1,516 SimHashes within 3 bits of the original's, 1,885 within 7, 1,920
# found here. Unrelated pages that share a block but one bit are this close once
# in ~30,000, and then cost one sketch comparison.
CANDIDATE_BITS = 10


def url_fingerprint(url: str) -> int:
    """A stable signed 64-bit fingerprint of a normalised URL (fits SQLite INTEGER).

    blake2b rather than ``hash()``: it must be the same in every process and
    across restarts (``hash`` of str is salted per process).
    """
    digest = blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ContentDedup:
    """Marks pages whose content was seen before: the same main text, or a near-duplicate.

    The first page with some content is the original; a later one gets
    ``duplicate_of`` = its URL when its main text is the same (``text_hash``),
    or when the SimHash index (k = ``max_bits``) finds a candidate within
    ``CANDIDATE_BITS`` and the two texts' MinHash sketches estimate a Jaccard
    similarity of their word 3-shingles of at least ``NEAR_DUPLICATE_JACCARD``
    (minhash.py says why the SimHash alone is not trusted). A stored page
    without a sketch is never a near-duplicate's original. A flagged page keeps
    its text: a wrong flag loses nothing.
    Pages already marked (a canonical URL elsewhere) are left as they are.

    Memory: per original, the SimHash index (~34 B and the URL, and 1 MiB in all
    at k = 3) and the sketch (257 B: one slot in a flat array)
    (bench/bench_dedup_check.py). Not thread-safe; the store's writer thread owns it.
    """

    def __init__(self, max_bits: int = 3) -> None:
        self._exact: dict[str, str] = {}  # text_hash -> URL of the first page with it
        self._near = SimHashIndex(k=max_bits)
        self._candidate_bits = max(2 * max_bits + 1, CANDIDATE_BITS)
        self._sketches = SketchSlots()  # the sketch of index position i in slot i

    def load(self, rows: Iterable[tuple[str, str | None, str | None, bytes | None]]) -> None:
        """Rebuild from stored originals: (url, text_hash, simhash hex, sketch) rows.

        A row without a sketch (stored before sketches existed) is an original
        for exact copies only: a SimHash match with it cannot be confirmed.
        """
        self._near.load(self._loaded(rows))  # one merge of the index at the end

    def _loaded(
        self, rows: Iterable[tuple[str, str | None, str | None, bytes | None]]
    ) -> Iterator[tuple[int, str]]:
        """The rows' (fingerprint, url) for the index, keeping their sketches and text
        hashes as it goes."""
        for url, exact, near, sketch in rows:
            if exact is not None:
                self._exact.setdefault(exact, url)
            if near is not None and sketch is not None and is_sketch(sketch):
                fingerprint = int(near, 16)
                self._sketches.append(bytes(sketch))  # slot i: index position i
                yield fingerprint, url

    def check(self, page: PageRecord) -> None:
        if page.duplicate_of is not None or page.text_hash is None or page.simhash is None:
            return
        original = self._exact.get(page.text_hash)
        fingerprint = int(page.simhash, 16)
        if original is None and page.minhash is not None:
            original = self._confirmed(fingerprint, page.minhash)
        if original is not None and original != page.url:
            page.duplicate_of = original
            return
        self._exact[page.text_hash] = page.url
        if page.minhash is not None:
            self._add_near(fingerprint, page.url, page.minhash)

    def _confirmed(self, fingerprint: int, sketch: bytes) -> str | None:
        """The closest SimHash candidate whose sketch agrees, if any."""
        for position in self._near.candidates(fingerprint, self._candidate_bits):
            if similarity(self._sketches[position], sketch) >= NEAR_DUPLICATE_JACCARD:
                return self._near.key(position)
        return None

    def _add_near(self, fingerprint: int, url: str, sketch: bytes) -> None:
        self._near.add(fingerprint, url)
        self._sketches.append(sketch)


class SketchSlots:
    """Sketches in one flat array, a fixed slot each: 257 B a sketch, no object each."""

    def __init__(self) -> None:
        self._bytes = bytearray()
        self._lengths = array("B")

    def append(self, sketch: bytes) -> None:
        self._bytes += sketch.ljust(SKETCH_MAX_BYTES, b"\0")
        self._lengths.append(len(sketch) // 4)

    def __getitem__(self, slot: int) -> bytes:
        start = SKETCH_MAX_BYTES * slot
        return bytes(self._bytes[start : start + 4 * self._lengths[slot]])
