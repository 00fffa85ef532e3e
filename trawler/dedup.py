"""Dedup: fingerprints of URLs (the seen set) and of page content (duplicates).

The URL-seen set stores 64-bit fingerprints of normalised URLs, as DESIGN.md
asks: 8 bytes a URL on disk, exact for any crawl we will run (the chance of
one collision among 10^8 URLs is about 3 in 10,000).
"""

from __future__ import annotations

from collections.abc import Iterable
from hashlib import blake2b

from trawler.records import PageRecord
from trawler.simhash import SimHashIndex


def url_fingerprint(url: str) -> int:
    """A stable signed 64-bit fingerprint of a normalised URL (fits SQLite INTEGER).

    blake2b rather than ``hash()``: it must be the same in every process and
    across restarts (``hash`` of str is salted per process).
    """
    digest = blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ContentDedup:
    """Marks pages whose content was seen before: exact text first, then SimHash.

    The first page with some content is the original; later ones get
    ``duplicate_of`` = its URL, and keep no text (it is not indexed again).
    Pages already marked (a canonical URL elsewhere) are left as they are.
    """

    def __init__(self, max_bits: int = 3) -> None:
        self._exact: dict[str, str] = {}  # text_hash -> URL of the first page with it
        self._near = SimHashIndex(k=max_bits)

    def load(self, rows: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Rebuild from stored originals: (url, text_hash, simhash hex) rows."""
        for url, exact, near in rows:
            if exact is not None:
                self._exact.setdefault(exact, url)
            if near is not None:
                self._near.add(int(near, 16), url)

    def check(self, page: PageRecord) -> None:
        if page.duplicate_of is not None or page.text_hash is None or page.simhash is None:
            return
        original = self._exact.get(page.text_hash)
        fingerprint = int(page.simhash, 16)
        if original is None:
            original = self._near.find(fingerprint)
        if original is not None and original != page.url:
            page.duplicate_of = original
            page.text = None
            return
        self._exact[page.text_hash] = page.url
        self._near.add(fingerprint, page.url)
