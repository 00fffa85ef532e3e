"""Duplicates found across all the workers of a job (issue 17): the embedded rule
(dedup.ContentDedup) over an index that every worker shares in PostgreSQL.

In a commit's transaction, before its page rows go in, the batch's pages are
checked, in order, against what the job stored before them:

- its originals with the same text hash (``pages``: duplicate_of NULL);
- its originals that share a SimHash block with a page, or have one a bit away
  from it (``dedup_blocks``: SimHashIndex's tables as rows, k+1 an original with
  a MinHash sketch: simhash_index.block_keys).

Those rows are loaded into a ContentDedup of the batch's own, which decides as in
embedded mode: the same text, or a SimHash candidate within CANDIDATE_BITS whose
MinHash sketch agrees. The batch's new originals' blocks go in with its pages.

The job's dedup step takes a transaction-scoped advisory lock, held until the
commit ends: two workers committing near-copies at once would otherwise each find
no original and both keep theirs. It costs little more than before: every
commit of a job upserts the same counter rows, which already serialise them.

Pages stored before this index existed are originals for exact copies only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from trawler.dedup import CANDIDATE_BITS, ContentDedup
from trawler.records import PageRecord
from trawler.simhash_index import block_keys

DEDUP_LOCK_CLASS = 0x74726177  # "traw"; with hashtext(job id): one commit at a time
_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
_EXACT = (
    "SELECT url, text_hash FROM pages WHERE job_id = %s AND text_hash = ANY(%s)"
    " AND duplicate_of IS NULL ORDER BY id"
)
# The probed originals within the candidate distance of the page that probed them,
# the distance taken in SQL: pages of one template share blocks, and reading every
# such original's sketch on each commit grew with the job (bench/RESULTS.md, issue 17).
_NEAR = (
    "SELECT url, simhash, minhash FROM pages WHERE job_id = %s AND url IN ("
    " SELECT b.url FROM unnest(%s::bigint[], %s::bigint[]) AS q (key, fp)"
    " JOIN dedup_blocks b ON b.job_id = %s AND b.key = q.key"
    " WHERE bit_count((b.simhash # q.fp)::bit(64)) <= %s) ORDER BY id"
)
_ADD_BLOCK = (
    "INSERT INTO dedup_blocks (job_id, key, url, simhash) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING"
)


def _bigint(key: int) -> int:
    """A key as PostgreSQL's signed bigint (a k = 0 key may use all 64 bits)."""
    return key - (1 << 64) if key >= 1 << 63 else key


@dataclass(slots=True, frozen=True)
class SharedDedup:
    """The job's --near-duplicate-bits (SimHashIndex's k)."""

    max_bits: int = 3

    async def mark(
        self, cur: psycopg.AsyncCursor, job_id: str, pages: Sequence[PageRecord]
    ) -> None:
        """Set ``duplicate_of`` of the batch's duplicates; index its new originals."""
        checked = [page for page in pages
                   if page.duplicate_of is None and page.text_hash and page.simhash]  # fmt: skip
        if not checked:
            return
        await cur.execute(_LOCK, (DEDUP_LOCK_CLASS, job_id))
        dedup = ContentDedup(self.max_bits)
        dedup.load(await self._stored(cur, job_id, checked))
        for page in checked:
            dedup.check(page)
        rows = [
            (job_id, _bigint(key), page.url, _bigint(int(page.simhash, 16)))  # type: ignore[arg-type]
            for page in checked if page.duplicate_of is None and page.minhash is not None
            for key in block_keys(int(page.simhash, 16), self.max_bits)  # type: ignore[arg-type]
        ]  # fmt: skip
        if rows:
            await cur.executemany(_ADD_BLOCK, rows)

    async def _stored(
        self, cur: psycopg.AsyncCursor, job_id: str, pages: list[PageRecord]
    ) -> list[tuple[str, str | None, str | None, bytes | None]]:
        """The stored originals that ContentDedup.check could find for ``pages``, as
        ContentDedup.load takes them: exact ones first (the first of a hash wins)."""
        hashes = sorted({page.text_hash for page in pages if page.text_hash})
        rows: list[tuple[str, str | None, str | None, bytes | None]] = []
        await cur.execute(_EXACT, (job_id, hashes))
        rows += [(url, text_hash, None, None) for url, text_hash in await cur.fetchall()]
        probes = sorted({
            (_bigint(key), _bigint(fingerprint))
            for page in pages if page.minhash is not None
            for fingerprint in (int(page.simhash, 16),)  # type: ignore[arg-type]
            for key in block_keys(fingerprint, self.max_bits, 1)
        })  # fmt: skip
        if probes:
            keys, fingerprints = [key for key, _ in probes], [fp for _, fp in probes]
            bits = max(2 * self.max_bits + 1, CANDIDATE_BITS)  # ContentDedup's candidates
            await cur.execute(_NEAR, (job_id, keys, fingerprints, job_id, bits))
            rows += [(url, None, simhash, sketch) for url, simhash, sketch in await cur.fetchall()]
        return rows
